// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// manCommand is the hidden subcommand that writes the man page, trawl.1,
// into a directory: make man runs it to rewrite docs/trawl.1.
const manCommand = "__man"

// manDate is the date in the man page's header, fixed so that every build
// writes the same page.
var manDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

func newManCommand() *cobra.Command {
	return &cobra.Command{
		Use:    manCommand + " DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			page, err := manPage(cmd.Root())
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(args[0], "trawl.1"), page, 0o644)
		},
	}
}

// manExtra are the man page's sections that --help leaves out.
const manExtra = `# EXIT STATUS
0 when the trace ended as asked (Ctrl-C, SIGTERM, --duration, the reader of
the output went away); 1 on an error (nothing to attach, no privileges, a
kernel without a feature); 2 on a usage error (bad flags or arguments,
values out of range, flags that do not go together, a command or shell
that does not exist), before anything was opened or written. With a COMMAND, its exit status, or 128 + the signal that ended it;
126 or 127 when it could not be run or was not found. 128 + N when signal N
interrupted trawl before tracing began, or a second time. trawl features
exits 0 when a backend can attach on the running kernel, 1 when none can.

# ENVIRONMENT
NO_COLOR, when set and not empty, turns the colours of --color auto off.

# FILES
trawl reads the kernel's BTF (/sys/kernel/btf), its symbols (/proc/kallsyms)
and its traceable functions (/sys/kernel/tracing/available_filter_functions).

`

// manPage renders trawl(1) from the command line's own definitions: one
// page with the flags of trawl and of each of its commands.
func manPage(root *cobra.Command) ([]byte, error) {
	root.InitDefaultHelpFlag()
	root.InitDefaultCompletionCmd()
	var long strings.Builder
	long.WriteString(mdEscape(root.Long) + "\n\n# OPTIONS\n" + manFlags(root.Flags()) + "# COMMANDS\n")
	for _, sub := range root.Commands() {
		if !sub.IsAvailableCommand() || sub.Name() == "help" {
			continue
		}
		sub.InitDefaultHelpFlag()
		fmt.Fprintf(&long, "## %s\n%s\n\n", mdEscape(sub.UseLine()), mdEscape(cmp.Or(sub.Long, sub.Short)))
		for _, subsub := range sub.Commands() {
			if subsub.IsAvailableCommand() {
				fmt.Fprintf(&long, "**%s**\n: %s\n\n", mdEscape(subsub.CommandPath()), mdEscape(subsub.Short))
			}
		}
		long.WriteString(manFlags(sub.LocalFlags()))
	}
	long.WriteString("**trawl help** *COMMAND*, **trawl** *COMMAND* **--help**\n: show the flags of a command\n\n")
	long.WriteString(manExtra)

	// The page is a command of its own: cobra/doc lists the flags and
	// commands of the command it renders in sections of its own, after
	// the description, and names a page per command; these are above.
	page := &cobra.Command{Use: root.Use, Short: root.Short, Long: long.String(), Example: root.Example, DisableAutoGenTag: true}
	page.Flags().Bool("help", false, "")
	page.Flags().MarkHidden("help")
	var b bytes.Buffer
	header := &doc.GenManHeader{Title: "TRAWL", Section: "1", Date: &manDate, Source: "trawl", Manual: "User Commands"}
	if err := doc.GenMan(page, header, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// manFlags writes the flags of fs as a Markdown definition list.
func manFlags(fs *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if f.Shorthand != "" {
			fmt.Fprintf(&b, "**-%s**, ", f.Shorthand)
		}
		fmt.Fprintf(&b, "**--%s**", f.Name)
		name, usage := pflag.UnquoteUsage(f)
		if name != "" {
			fmt.Fprintf(&b, " *%s*", name)
		}
		if !slices.Contains([]string{"", "0", "0s", "false"}, f.DefValue) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(&b, "\n: %s\n\n", mdEscape(usage))
	})
	return b.String()
}

// mdEscape keeps text from being read as Markdown.
func mdEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]()#+-.!:|&<>~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
