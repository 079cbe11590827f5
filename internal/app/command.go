package app

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/kproxy/kproxy/internal/config"
)

// RunFunc runs the proxy with a resolved configuration until ctx is done. It
// must honour cfg.Cleanup and cfg.InitOnly (do that and return).
type RunFunc func(ctx context.Context, cfg *config.Config) error

// CommandOption adjusts NewCommand.
type CommandOption func(*commandSettings)

type commandSettings struct {
	runnableModes []config.ProxyMode
	// applyLogging applies the logging configuration to the process (klog);
	// replaced in tests because it may only happen once per process.
	applyLogging func(*logsapi.LoggingConfiguration, featuregate.FeatureGate) error
}

// WithRunnableModes sets the proxy modes this build can run (default
// config.DefaultRunnableModes()); a configuration choosing another valid
// upstream mode is refused with a clear error.
func WithRunnableModes(modes ...config.ProxyMode) CommandOption {
	return func(s *commandSettings) { s.runnableModes = modes }
}

const proxyCommandLongHelp = `The Kubernetes network proxy runs on each node. This
reflects services as defined in the Kubernetes API on each node and can do simple
TCP, UDP, and SCTP stream forwarding or round robin TCP, UDP, and SCTP forwarding across a set of backends.
Service cluster IPs and ports are currently found through Docker-links-compatible
environment variables specifying ports opened by the service proxy. There is an optional
addon that provides cluster DNS for these cluster IPs. The user must create a service
with the apiserver API to configure the proxy.`

// NewCommand returns the kube-proxy command. run is called with the resolved
// configuration unless --version or --write-config-to ends the command first.
// The command may be given subcommands; the root's flags stay local to it.
func NewCommand(run RunFunc, opts ...CommandOption) *cobra.Command {
	settings := commandSettings{
		runnableModes: config.DefaultRunnableModes(),
		applyLogging: func(c *logsapi.LoggingConfiguration, fg featuregate.FeatureGate) error {
			return logsapi.ValidateAndApplyAsField(c, fg, field.NewPath("logging"))
		},
	}
	for _, opt := range opts {
		opt(&settings)
	}

	fg, fgErr := config.NewFeatureGate()
	var options *config.Options
	if fgErr == nil {
		options = config.NewOptions(fg)
		options.RunnableModes = settings.runnableModes
	}
	var version versionValue

	cmd := &cobra.Command{
		Use:  "kube-proxy",
		Long: proxyCommandLongHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
		// Usage is printed for flag errors only (see SetFlagErrorFunc), and
		// errors are printed by main, as component-base's cli.Run does.
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fgErr != nil {
				return fgErr
			}
			if version.requested() {
				_, err := fmt.Fprint(cmd.OutOrStdout(), version.output())
				return err
			}
			return executeProxyCommand(cmd, options, settings, run)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		c.SilenceUsage = false
		return err
	})
	cmd.SetGlobalNormalizationFunc(cliflag.WordSepNormalizeFunc)

	fs := cmd.Flags()
	if options != nil {
		options.AddFlags(fs)
	}
	fs.Var(&version, "version", "--version, --version=raw prints version information and quits; --version=vX.Y.Z... sets the reported version")
	fs.Lookup("version").NoOptDefVal = "true"
	_ = cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	return cmd
}

// executeProxyCommand resolves the configuration, applies logging, and dispatches.
func executeProxyCommand(cmd *cobra.Command, options *config.Options, settings commandSettings, run RunFunc) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := options.Complete(cmd.Flags())
	if err != nil {
		var agg utilerrors.Aggregate
		if errors.As(err, &agg) {
			return fmt.Errorf("failed validate: %w", err)
		}
		return fmt.Errorf("failed complete: %w", err)
	}
	if err := settings.applyLogging(&cfg.Logging, cfg.FeatureGates); err != nil {
		return fmt.Errorf("initialize logging: %w", err)
	}
	logger := klog.FromContext(ctx)
	for _, w := range cfg.Warnings {
		logger.Info("Warning: configuration", "err", w)
	}
	cliflag.PrintFlags(cmd.Flags())

	if options.WriteConfigTo != "" {
		if err := config.WriteFile(options.WriteConfigTo, cfg.V1Alpha1); err != nil {
			return err
		}
		logger.Info("Wrote configuration", "file", options.WriteConfigTo)
		return nil
	}
	return run(ctx, cfg)
}

// versionValue is --version: a boolean-like flag that also accepts "raw" and,
// as upstream, a version string that only changes the reported version.
type versionValue struct{ value string }

func (v *versionValue) Set(s string) error {
	switch s {
	case "true", "false", "raw":
	default:
		if len(s) < 2 || s[0] != 'v' {
			return fmt.Errorf("invalid value %q: must be true, false, raw or vX.Y.Z", s)
		}
	}
	v.value = s
	return nil
}

func (v *versionValue) String() string {
	if v.value == "" {
		return "false"
	}
	return v.value
}

func (v *versionValue) Type() string { return "version" }

// requested reports whether the command should print the version and stop.
func (v *versionValue) requested() bool { return v.value == "true" || v.value == "raw" }

func (v *versionValue) output() string {
	if v.value == "raw" {
		return fmt.Sprintf("version.Info{GitVersion:%q, GoVersion:%q, Compiler:%q, Platform:\"%s/%s\"}\n",
			config.Version, runtime.Version(), runtime.Compiler, runtime.GOOS, runtime.GOARCH)
	}
	return fmt.Sprintf("Kubernetes %s\n", config.Version)
}
