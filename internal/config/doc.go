// Package config is kproxy's configuration: upstream kube-proxy 1.37's command
// line and KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) file,
// resolved into the normalised Config the daemon consumes.
//
// Contract:
//   - Options.AddFlags registers every upstream flag; Options.Complete applies
//     upstream's precedence (see its doc), the v1alpha1 defaults, the Linux
//     mode-dependent defaults (a blank mode means iptables, as upstream), sets
//     the feature gates, and validates with upstream's field
//     paths and messages. It returns a complete Config or an error naming the
//     offending field; never a partial Config.
//   - Config files are decoded strictly; if only strictness fails (unknown or
//     duplicate fields) they are decoded leniently and Config.Warnings says
//     why. A wrong apiVersion or kind is an error.
//   - NewFeatureGate returns a fresh gate set per call (no global registry).
//   - The package is pure: it does not log and holds no mutable global state
//     except Version, which release builds set with -ldflags.
package config
