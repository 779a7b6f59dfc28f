// SPDX-License-Identifier: Apache-2.0

// Command trawl traces many kernel functions at once with one generic BPF
// program, decoding arguments and return values with the kernel's BTF.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trawl-dev/trawl"
)

// errUsage marks command-line mistakes, which exit with status 2.
var errUsage = errors.New("usage")

// isUsage reports whether err is a usage error: a command-line mistake,
// or a trace or pattern the library refuses before it reads anything of
// the kernel's.
func isUsage(err error) bool {
	return errors.Is(err, errUsage) || errors.Is(err, trawl.ErrBadConfig) || errors.Is(err, trawl.ErrBadPattern)
}

// main exits 0 on success, 2 on a usage error, 1 on other errors; with a
// command, with the command's status; interrupted before tracing began,
// with 128 + the signal's number.
func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	err := run(handleSignals(), os.Args[1:], os.Stdout, os.Stderr)
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "trawl:", ee.msg)
		}
		os.Exit(ee.status)
	case isUsage(err):
		fmt.Fprintln(os.Stderr, "trawl:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "trawl:", err)
		os.Exit(1)
	}
}

// memoryLimit is the Go runtime's soft memory limit (GOMEMLIMIT overrides
// it). Attaching every function holds 85-105 MB of catalogue, plans and
// types at once, and by default the heap grows to twice its live size
// before the collector runs. The process's resident memory is this plus
// what the Go runtime does not count: the ring buffer, mapped twice
// (32 MB at the default size), and the binary's pages (about 16 MB); the
// limit leaves them room under 200 MB with every function
// (docs/benchmarks.md, "Memory of the command"). Near the limit the
// collector runs more often; below it nothing changes.
const memoryLimit = 128 << 20

// keepHeapRoom raises the soft memory limit main set, once a trace is
// open, if the heap it holds leaves too little of the limit free (see
// roomForHeap). A limit set with GOMEMLIMIT is left alone.
func keepHeapRoom() {
	if debug.SetMemoryLimit(-1) != memoryLimit {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	live := int64(sample[0].Value.Uint64())
	limit := roomForHeap(live)
	if limit > memoryLimit {
		debug.SetMemoryLimit(limit)
	}
	slog.Debug("soft memory limit", "live_heap_mb", live>>20, "limit_mb", limit>>20)
}

// roomForHeap returns the soft memory limit for a trace whose live heap
// is live bytes: memoryLimit, or a quarter more than the heap where that
// is more (more functions than memoryLimit was sized for, as on a kernel
// with many modules loaded). With less room the collector would run
// almost without pause, taking up to half the CPU from reading the calls.
func roomForHeap(live int64) int64 { return max(memoryLimit, live+live/4) }

// run runs the trawl command line args (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// rootLong is the description of trawl in --help and the man page.
const rootLong = `trawl attaches one generic BPF program to many kernel functions at once,
chosen by pattern, decodes every call's arguments and return value with the
kernel's BTF, and writes the calls, or statistics of them, as they happen.

With a COMMAND after --, trawl starts it, traces only it and its children,
and stops when it exits; without one, it traces the whole system until
Ctrl-C, SIGTERM or --duration. At the end, a summary on standard error
accounts for every call the program saw: shown, not read, dropped or
filtered out; lines for the calls missed or filtered in the kernel follow
only when there were some (every count with --debug).

A PATTERN is [!][MODULE:]NAME[(TYPE, ...)], NAME a glob or a /regexp/:
'tcp_*', '!tcp_v6_*', 'nf_conntrack:*', '/^vfs_(read|write)$/',
'*(struct sk_buff *)'. trawl list shows what patterns select.
The pattern and --filter languages are described in trawl-patterns(7)
and trawl-filter(7).

A PATTERN tp:SUBSYSTEM[:EVENT], both globs, selects the kernel's BTF-typed
tracepoints ('tp:sched:*', 'tp:skb:kfree_skb'), mixed freely with
functions: each event is one line (JSON "kind":"tracepoint") with the
tracepoint's arguments, and no duration or return value. They work with
the task filters, --filter, --show, --entry (events inside entry calls;
a tp: pattern is no entry), --track (an event receiving a tracked object
joins its journey), --stack and every output: an event inside its call
in the tree, an instant event in perfetto and chrome-json, a span event
of its call's span with --otlp, a count without latency in --stats.`

const rootExample = `  trawl -d 5s 'tcp_*'                     trace every tcp_ function for 5 seconds
  trawl vfs_read vfs_write -- cat /etc/hostname
                                          trace a command and its children
  trawl -f stats 'vfs_*' -- make          counts, errors and latencies per function
  trawl --errors --filter 'filename ~ "/etc/*"' do_sys_openat2
                                          failed opens under /etc
  trawl -f perfetto -o trace.pftrace -p 1234 'ext4_*'
                                          a Perfetto trace of one process
  trawl tp:skb:kfree_skb                  dropped packets, the reason by name
  trawl -f json --stack -o rec.json -d 10s 'vfs_*'
  trawl report -f html -o rec.html rec.json
                                          record once, then a page of tables,
                                          histograms and a flame graph`

// newRoot returns trawl's command line: the root command traces; the
// subcommands list functions, probe the kernel, complete and document.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	f := &traceFlags{}
	root := &cobra.Command{
		Use:               "trawl [flags] PATTERN... [-- COMMAND [ARG...]]",
		Short:             "Trace many kernel functions at once",
		Long:              rootLong,
		Example:           rootExample,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completePatterns,
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.version {
				fmt.Fprintln(cmd.OutOrStdout(), trawl.Version())
				return nil
			}
			if len(args) == 0 && cmd.Flags().NFlag() == 0 {
				return fmt.Errorf("%w: no command or pattern given: say which functions to trace, e.g. trawl 'tcp_*', or see trawl --help", errUsage)
			}
			patterns, command := args, []string(nil)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				patterns, command = args[:dash], args[dash:]
			}
			f.set = map[string]bool{}
			cmd.Flags().Visit(func(fl *pflag.Flag) { f.set[fl.Name] = true })
			return runTrace(cmd.Context(), f, patterns, command, stdout, stderr)
		},
	}
	// Flags are listed with their text wrapped to 80 columns.
	root.SetUsageTemplate(strings.ReplaceAll(root.UsageTemplate(), ".LocalFlags.FlagUsages", "wrappedFlagUsages .LocalFlags"))
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %w", errUsage, err)
	})
	f.register(root)
	root.PersistentFlags().BoolVar(&f.debug, "debug", false, "print diagnostics on standard error, among them how long each start-up step takes, and every count of the summary at the end of a trace")
	root.PersistentPreRun = func(*cobra.Command, []string) {
		if f.debug {
			slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
		}
	}
	root.AddCommand(newListCommand(), newFeaturesCommand(), newReportCommand(), newCacheCommand(), newManCommand(),
		hiddenCommand(gateCommand, runGate), hiddenCommand(workloadCommand, runWorkload))
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	strictArgs(root)
	return root
}

// strictArgs makes every mistake in the words after a command a usage
// error, in cmd and its subcommands: cobra's checks of their arguments,
// help about a command that does not exist, and a command that only
// groups others (completion) given none of them, which cobra would answer
// with its help and status 0.
func strictArgs(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		strictArgs(sub)
	}
	if cmd.Name() == "help" {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if _, rest, err := c.Root().Find(args); err != nil || len(rest) > 0 {
				return fmt.Errorf("no command %q: see %s", strings.Join(args, " "), c.CommandPath())
			}
			return nil
		}
	}
	if !cmd.Runnable() {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			var names []string
			for _, sub := range c.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			return fmt.Errorf("%w: %s wants one of %s", errUsage, c.CommandPath(), strings.Join(names, ", "))
		}
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			return nil
		}
	}
}

func init() {
	cobra.AddTemplateFunc("wrappedFlagUsages", func(fs *pflag.FlagSet) string { return fs.FlagUsagesWrapped(80) })
}

// hiddenCommand is a subcommand trawl runs itself, left out of the help;
// it parses no flags, so that the arguments it passes on stay as they are.
func hiddenCommand(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// oneLine keeps a message on one line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }
