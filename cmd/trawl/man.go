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

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// manCommand is the hidden subcommand that writes the man pages, trawl.1,
// trawl-patterns.7 and trawl-filter.7, into a directory, the last two
// from patterns.md and filter.md in the first directory it is given:
// make man runs it to rewrite them in docs.
const manCommand = "__man"

// manSection7 are the pages of section 7: the languages trawl reads, each
// rendered from its Markdown description in docs.
var manSection7 = []struct{ name, source, summary string }{
	{"trawl-patterns", "patterns.md", "the patterns that select the functions trawl traces"},
	{"trawl-filter", "filter.md", "the expressions of trawl --filter and --show"},
}

// manDate is the date in the man page's header, fixed so that every build
// writes the same page.
var manDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

func newManCommand() *cobra.Command {
	return &cobra.Command{
		Use:    manCommand + " DOCS [OUT]",
		Hidden: true,
		Args:   cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := args[len(args)-1]
			page, err := manPage(cmd.Root())
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, "trawl.1"), page, 0o644); err != nil {
				return err
			}
			for _, p := range manSection7 {
				md, err := os.ReadFile(filepath.Join(args[0], p.source))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(out, p.name+".7"), manPage7(p.name, p.summary, md), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// manExamples are the questions people bring to trawl, each with a
// command that answers it: the EXAMPLES of the man page, and the table of
// the README (a test checks that both hold the same commands).
var manExamples = []struct{ question, command string }{
	{"Which calls happen, with which values?", `trawl -d 10s 'tcp_*'`},
	{"Why did this fail, and where was the error born?", `trawl --entry do_sys_openat2 --errors --stack path_openat link_path_walk -- cat go.mod/x`},
	{"Where did this packet go?", `trawl --track skb --filter 'skb->len == 1234' '*(struct sk_buff *)'`},
	{"What is hot, and how slow?", `trawl -f stats -d 10s 'vfs_*'`},
	{"Where does the time go, as a flame graph?", `trawl --stats -f folded --stack -o vfs.folded -d 10s 'vfs_*'`},
	{"All of it, on one page?", `trawl -f html --stack -o trace.html -d 10s 'tcp_*'`},
	{"What happens under one call?", `trawl --entry do_sys_openat2 -f tree '*'`},
	{"What does this command do, and only it?", `trawl 'vfs_*' -- make`},
	{"Who called?", `trawl --stack -d 5s kfree_skb_reason`},
	{"Record now, look later?", `trawl -f json --stack -o rec.json 'vfs_*' -- make`},
	{"The recording, as a page?", `trawl report -f html -o report.html rec.json`},
	{"The whole fleet, in Prometheus?", `trawl --stats --listen :9750 'tcp_*' 'vfs_*'`},
	{"The whole fleet, as OpenTelemetry spans?", `trawl --otlp grpcs://collector:4317 'tcp_*'`},
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
NO\_COLOR
: when set and not empty, turns the colours of --color auto off.

GOMEMLIMIT
: the Go runtime's soft memory limit; when it is not set, trawl sets one of its own.

GOGC
: the Go runtime's garbage collection target; when it is not set, trawl --listen collects at 50% instead of 100%, to keep a long-running service small.

# FILES
/sys/kernel/btf/vmlinux, /sys/kernel/btf/*MODULE*
: the kernel's BTF, from which trawl reads every function's arguments; --btf and --btf-dir name files in its place.

/proc/kallsyms
: the kernel's symbols.

/sys/kernel/tracing/available\_filter\_functions
: the functions ftrace can trace.

/usr/lib/systemd/system/trawl.service, /etc/default/trawl
: the systemd unit the packages install (not enabled), and the arguments it runs trawl with, **TRAWL\_ARGS=**.

# SEE ALSO
**trawl-patterns**(7), **trawl-filter**(7), **bpftrace**(8), **perf-trace**(1), **strace**(1), retsnoop (https://github.com/anakryiko/retsnoop)

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
	long.WriteString("# EXAMPLES\n")
	for _, e := range manExamples {
		fmt.Fprintf(&long, "%s\n: **%s**\n\n", mdEscape(e.question), mdEscape(e.command))
	}
	long.WriteString(manExtra)

	// The page is a command of its own: cobra/doc lists the flags and
	// commands of the command it renders in sections of its own, after
	// the description, and names a page per command; these are above.
	page := &cobra.Command{Use: root.Use, Short: root.Short, Long: long.String(), DisableAutoGenTag: true}
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
		switch {
		case name != "" && f.NoOptDefVal != "":
			// A value of its own is optional: joined by an equals sign.
			fmt.Fprintf(&b, "\\[=*%s*\\]", name)
		case name != "":
			fmt.Fprintf(&b, " *%s*", name)
		}
		if !slices.Contains([]string{"", "0", "0s", "false", "[]"}, f.DefValue) {
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

// manPage7 renders the Markdown description md of a language as the page
// name(7): its first heading gives way to the page's NAME, the text up to
// the next heading is the DESCRIPTION, and each section keeps its heading.
func manPage7(name, summary string, md []byte) []byte {
	text := string(md)
	if strings.HasPrefix(text, "# ") {
		_, text, _ = strings.Cut(text, "\n")
	}
	// md2man takes the first heading for the page's title, and writes
	// it as a .TH line without a section: the page's own takes its place.
	text = "# " + name + "\n\n# NAME\n" + mdEscape(name) + " \\- " + mdEscape(summary) + "\n\n# DESCRIPTION\n" + strings.TrimLeft(text, "\n") +
		"\n# SEE ALSO\n**trawl**(1), " + seeAlso7(name) + "\n"
	page := string(md2man.Render([]byte(text)))
	th := fmt.Sprintf(".TH %q \"7\" %q \"trawl\" \"Miscellaneous Information Manual\"", strings.ToUpper(name), manDate.Format("Jan 2006"))
	head, rest, ok := strings.Cut(page, ".TH "+name+"\n")
	if !ok {
		return []byte(page)
	}
	return []byte(textBlocks(head + th + "\n" + rest))
}

// textBlocks makes every cell of the page's tables a text block (T{ T}),
// which tbl wraps to the page's width, where md2man writes only long
// cells so.
func textBlocks(page string) string {
	var b strings.Builder
	for {
		before, table, ok := strings.Cut(page, ".TS\n")
		if !ok {
			b.WriteString(page)
			return b.String()
		}
		table, after, _ := strings.Cut(table, ".TE\n")
		b.WriteString(before + ".TS\n")
		lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
		i := 0
		for ; i < len(lines) && !strings.HasSuffix(strings.TrimSpace(lines[i]), "."); i++ {
			b.WriteString(lines[i] + "\n")
		}
		if i < len(lines) {
			b.WriteString(lines[i] + "\n")
			i++
		}
		for i < len(lines) {
			var row []string
			line := lines[i]
			i++
			for {
				field, rest, more := strings.Cut(line, "\t")
				if field != "T{" || more {
					row = append(row, field)
					if !more {
						break
					}
					line = rest
					continue
				}
				var block []string
				for i < len(lines) && !strings.HasPrefix(lines[i], "T}") {
					block = append(block, lines[i])
					i++
				}
				row = append(row, strings.Join(block, "\n"))
				if i >= len(lines) {
					break
				}
				line = strings.TrimPrefix(lines[i][2:], "\t")
				tail := lines[i][2:]
				i++
				if tail == "" {
					break
				}
			}
			for j, cell := range row {
				row[j] = "T{\n.na\n" + cell + "\nT}"
			}
			b.WriteString(strings.Join(row, "\t") + "\n")
		}
		b.WriteString(".TE\n")
		page = after
	}
}

// seeAlso7 names the other pages of section 7.
func seeAlso7(name string) string {
	var others []string
	for _, p := range manSection7 {
		if p.name != name {
			others = append(others, "**"+mdEscape(p.name)+"**(7)")
		}
	}
	return strings.Join(others, ", ")
}
