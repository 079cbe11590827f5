package app

import (
	"github.com/spf13/cobra"

	"github.com/kproxy/kproxy/internal/inspect"
)

// verifyDifferencesExit is `kube-proxy verify`'s exit code when the kernel differs
// from what the proxy applied (1 is an error, as for every tool).
const verifyDifferencesExit = 2

func newVerifyCommand() *cobra.Command {
	var opts toolOptions
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Compare this node's kernel rules with what the proxy last applied, and list every difference",
		Long: "Compare this node's kernel rules with what the proxy last applied, and list every difference:\n" +
			"missing, extra or changed tables, chains, rules, sets, maps and elements, and in ipvs mode\n" +
			"virtual servers, real servers and kube-ipvs0's addresses.\n" +
			"The proxy makes the comparison when asked, between two syncs. Exit code 0: no difference;\n" +
			"2: differences (the proxy repairs them at its next periodic check, within one sync period);\n" +
			"1: error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var v inspect.Verification
			if err := opts.client().Get(cmd.Context(), "verify", nil, &v); err != nil {
				return err
			}
			if err := opts.print(cmd.OutOrStdout(), &v, func() error { return inspect.PrintVerification(cmd.OutOrStdout(), &v) }); err != nil {
				return err
			}
			if n := v.Differences(); n > 0 {
				return exitCodeError{code: verifyDifferencesExit, msg: inspect.CountDifferences(n)}
			}
			return nil
		},
	}
	opts.addFlags(cmd)
	return cmd
}
