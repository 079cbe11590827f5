package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	componentversion "k8s.io/component-base/version"
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
			return executeProxyCommand(cmd, options, settings, version.reported(), run)
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
func executeProxyCommand(cmd *cobra.Command, options *config.Options, settings commandSettings, reportedVersion string, run RunFunc) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := options.Complete(cmd.Flags())
	if err != nil {
		var invalid *config.ValidationError
		if errors.As(err, &invalid) {
			return fmt.Errorf("failed validate: %w", err)
		}
		return fmt.Errorf("failed complete: %w", err)
	}
	cfg.Version = reportedVersion
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

// versionValue is --version, as component-base's verflag: a boolean-like flag that
// also accepts "raw" and a version string vX.Y.Z... that only changes the reported
// version (it must keep the binary's major, minor and patch).
type versionValue struct {
	print string // "", "true" or "raw"
	// dynamic is the version set with --version=vX.Y.Z..., "" if none.
	dynamic string
}

func (v *versionValue) Set(s string) error {
	if s == "raw" {
		v.print = s
		return nil
	}
	if strings.HasPrefix(s, "v") {
		if err := validateDynamicVersion(s, config.Version); err != nil {
			return err
		}
		v.dynamic = s
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	v.print = ""
	if b {
		v.print = "true"
	}
	return nil
}

// validateDynamicVersion accepts a semantic version with the major, minor and patch of
// the binary's (upstream's rule and message).
func validateDynamicVersion(dynamic, binary string) error {
	if dynamic == binary {
		return nil
	}
	want, err := utilversion.ParseSemantic(binary)
	if err != nil {
		return fmt.Errorf("binary version %q: %w", binary, err)
	}
	got, err := utilversion.ParseSemantic(dynamic)
	if err != nil {
		return err
	}
	if got.Major() != want.Major() || got.Minor() != want.Minor() || got.Patch() != want.Patch() {
		return fmt.Errorf("version %q must match major/minor/patch of default version %q", dynamic, binary)
	}
	return nil
}

func (v *versionValue) String() string {
	switch {
	case v.print != "":
		return v.print
	case v.dynamic != "":
		return v.dynamic
	}
	return "false"
}

func (v *versionValue) Type() string { return "version" }

// IsBoolFlag lets --version stand alone, as a boolean flag.
func (v *versionValue) IsBoolFlag() bool { return true }

// requested reports whether the command should print the version and stop.
func (v *versionValue) requested() bool { return v.print != "" }

// reported is the version the proxy reports: --version=vX.Y.Z's, or the binary's.
func (v *versionValue) reported() string {
	if v.dynamic != "" {
		return v.dynamic
	}
	return config.Version
}

func (v *versionValue) output() string {
	if v.print == "raw" {
		// component-base's version.Info (hack/build.sh stamps the upstream release it
		// is compatible with), with kproxy's own version.
		info := componentversion.Get()
		info.GitVersion = v.reported()
		return fmt.Sprintf("%#v\n", info)
	}
	return fmt.Sprintf("Kubernetes %s\n", v.reported())
}

// Execute runs the command and returns the process exit code, reporting a failure
// as component-base's cli.Run does: an error before the flags were parsed (a bad
// flag or argument) is written to stderr as "Error: ...", one after it is logged
// through klog as "command failed", so that --logging-format=json gets JSON.
func Execute(ctx context.Context, cmd *cobra.Command, stderr io.Writer) int {
	flagsParsed := false
	previous := cmd.PersistentPreRunE
	cmd.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		flagsParsed = true
		if previous != nil {
			return previous(c, args)
		}
		return nil
	}
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if flagsParsed {
		klog.ErrorS(err, "command failed")
	} else {
		_, _ = fmt.Fprintf(stderr, "Error: %v\n", err)
	}
	return 1
}
