// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trawl-dev/trawl"
)

func newFeaturesCommand() *cobra.Command {
	var markdown string
	var header bool
	var btf btfFlags
	cmd := &cobra.Command{
		Use:   "features [flags] [PATTERN...]",
		Short: "Show the attach mechanisms the kernel supports, and the backend auto picks",
		Long: `features probes the running kernel for each feature trawl's backends use
(kprobes, fentry, the ring buffer, task storage, bpf_get_current_task_btf,
pointer arguments of global functions, function arguments, kprobe.multi,
kprobe.session, raw tracepoint cookies, fsession, tracing_multi) and says
for each missing one why:
a kernel too old, or one built without CONFIG_FPROBE or CONFIG_KPROBES;
then where the kernel's BTF comes from (the kernel, or the file --btf
names), and which backend --backend auto picks, by the number of
functions. With
patterns, it also says which backend auto picks for them, and why.

It exits 1 when no backend can attach on this kernel, after saying in one
line on stderr the first cause to remove, as tracing would; scripts can
test for support with trawl features >/dev/null.`,
		Example: `  trawl features
  trawl features 'tcp_*'`,
		ValidArgsFunction: completePatterns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFeatures(args, markdown, header, btf, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&markdown, "markdown", "", "print a Markdown table row for the kernel named `NAME`")
	cmd.Flags().BoolVar(&header, "header", false, "with --markdown, print the table header first")
	btf.register(cmd)
	return cmd
}

// runFeatures prints which attach mechanisms the running kernel supports
// and, given patterns, which backend auto would choose for them; with
// markdown, a row of the README's table for the kernel of that name. It
// returns why no backend can attach, if none can. With btf set, the
// kernel's BTF comes from its files.
func runFeatures(patterns []string, markdown string, header bool, btf btfFlags, stdout io.Writer) error {
	if err := checkExclusions(patterns); err != nil {
		return err
	}
	if err := trawl.UseBTF(btf.file, btf.dir); err != nil {
		return err
	}
	r := trawl.ProbeFeatures()
	if markdown == "" {
		fmt.Fprint(stdout, r.String())
		if err := r.Err(); err != nil || len(patterns) == 0 {
			return err
		}
		name, why, err := trawl.ChooseBackend(trawl.Config{Patterns: patterns, Backend: trawl.BackendAuto, BTF: btf.file, BTFDir: btf.dir})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "auto backend    %s: %s\n", name, why)
		return nil
	}
	if header {
		fmt.Fprintln(stdout, strings.TrimSuffix(trawl.FeaturesMarkdownHeader(), "\n"))
	}
	fmt.Fprintln(stdout, strings.TrimSuffix(r.Markdown(markdown), "\n"))
	return r.Err()
}
