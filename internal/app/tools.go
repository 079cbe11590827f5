package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kproxy/kproxy/internal/inspect"
)

// toolNames are the subcommands kproxy adds to kube-proxy's binary, for people on
// a node (`kubectl exec ds/kube-proxy -- kube-proxy explain ...`). Upstream's
// command takes no arguments, so a first argument naming one of them shadows no
// invocation of the proxy (upstream would refuse it).
var toolNames = []string{"explain", "trace", "verify"}

// IsToolInvocation reports whether args (os.Args[1:]) run a tool rather than the
// proxy.
func IsToolInvocation(args []string) bool {
	return len(args) > 0 && slices.Contains(toolNames, args[0])
}

// ExecuteTool runs the tool args names, writing its output to stdout and its error,
// if any, to stderr; it returns the exit code (0, or 1 on error).
func ExecuteTool(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{Use: "kube-proxy", SilenceUsage: true, SilenceErrors: true}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newExplainCommand(), newTraceCommand(), newVerifyCommand())
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var exit exitCodeError
		if errors.As(err, &exit) {
			fmt.Fprintln(stderr, exit.msg)
			return exit.code
		}
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

// exitCodeError ends a tool with an exit code other than 1 and a message that is
// not an error (kube-proxy verify: 2 when the kernel differs).
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return e.msg }

// toolOptions are the flags every tool reading the state API takes.
type toolOptions struct {
	address string
	output  string
}

func (o *toolOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.address, "address", "127.0.0.1:10249",
		"the proxy's metrics address (metricsBindAddress), where it serves its state")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
}

func (o *toolOptions) client() *inspect.Client { return &inspect.Client{Address: o.address} }

// print writes doc in the chosen format, with table for "table".
func (o *toolOptions) print(w io.Writer, doc any, table func() error) error {
	switch o.output {
	case "table":
		return table()
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	case "yaml":
		b, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("--output %q: must be table, json or yaml", o.output)
}

func newExplainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Explain what this node's proxy does with a Service, or with the node's traffic",
	}
	cmd.AddCommand(newExplainServiceCommand(), newExplainNodeCommand())
	return cmd
}

func newExplainServiceCommand() *cobra.Command {
	var opts toolOptions
	var port string
	cmd := &cobra.Command{
		Use:   "service NAMESPACE/NAME",
		Short: "How this node handles a Service: addresses, traffic, every endpoint and why it is or is not used, kernel objects",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, ok := strings.Cut(args[0], "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return fmt.Errorf("%q: want NAMESPACE/NAME", args[0])
			}
			query := url.Values{}
			if port != "" {
				query.Set("port", port)
			}
			var svc inspect.Service
			if err := opts.client().Get(cmd.Context(), "services/"+url.PathEscape(ns)+"/"+url.PathEscape(name), query, &svc); err != nil {
				return err
			}
			return opts.print(cmd.OutOrStdout(), &svc, func() error { return inspect.PrintService(cmd.OutOrStdout(), &svc) })
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().StringVar(&port, "port", "", "only the port with this name or number")
	return cmd
}

func newExplainNodeCommand() *cobra.Command {
	var opts toolOptions
	var syncs int
	cmd := &cobra.Command{
		Use:   "node",
		Short: "This node's proxy: mode, families, zone, local traffic detector, NodePort addresses, ServiceCIDRs, last syncs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var node inspect.Node
			if err := opts.client().Get(cmd.Context(), "node", nil, &node); err != nil {
				return err
			}
			return opts.print(cmd.OutOrStdout(), &node, func() error { return inspect.PrintNode(cmd.OutOrStdout(), &node, syncs) })
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().IntVar(&syncs, "syncs", 10, "how many of the last syncs of each family the table shows")
	return cmd
}
