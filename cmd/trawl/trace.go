package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/render"
)

// traceFlags are the flags of the tracing command.
type traceFlags struct {
	backend  string
	pid      int
	comm     string
	cgroup   string
	minDur   time.Duration
	errors   bool
	filter   string
	duration time.Duration
	json     bool
	tree     bool
	perfetto string
	stats    bool
	interval time.Duration
	sortBy   string
	hist     string
	output   string
	depth    int
	maxBytes int
	full     bool
	workload bool
}

func (f *traceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "auto", "attach with `BACKEND`: "+strings.Join(trawl.Backends, ", ")+" (trawl features PATTERN... shows what auto picks)")
	fs.IntVar(&f.pid, "p", 0, "trace only process `PID` and its children")
	fs.StringVar(&f.comm, "comm", "", "trace only tasks named `NAME`")
	fs.StringVar(&f.cgroup, "cgroup", "", "trace only tasks in the cgroup v2 directory `PATH` (not its children)")
	fs.DurationVar(&f.minDur, "min-duration", 0, "show only calls that take at least `D` (e.g. 1ms)")
	fs.BoolVar(&f.errors, "errors", false, "show only calls that return an error (negative errno, NULL or ERR_PTR)")
	fs.StringVar(&f.filter, "filter", "", "show only calls for which `EXPR` holds, e.g. 'skb->len > 1000 && ret < 0' or 'filename ~ \"/tmp/*\"' (see README)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until Ctrl-C or the command exits)")
	fs.BoolVar(&f.json, "json", false, "write one JSON object per call (schema: docs/json-schema.md)")
	fs.BoolVar(&f.tree, "tree", false, "write a call tree per task")
	fs.StringVar(&f.perfetto, "perfetto", "", "write a Perfetto/Chrome trace to `FILE`")
	fs.BoolVar(&f.stats, "stats", false, "write per-function counts, errors and latency percentiles")
	fs.DurationVar(&f.interval, "interval", 0, "with --stats, refresh the table this often")
	fs.StringVar(&f.sortBy, "sort", "count", "with --stats, sort by `COLUMN`: "+strings.Join(render.SortColumns, ", "))
	fs.StringVar(&f.hist, "hist", "", "with --stats, show the latency histogram of `FUNC`")
	fs.StringVar(&f.output, "o", "", "write to `FILE` instead of standard output")
	fs.IntVar(&f.depth, "depth", 0, "levels of nested structs shown (default 2)")
	fs.IntVar(&f.maxBytes, "max-bytes", 0, "longest string shown (default 64)")
	fs.BoolVar(&f.full, "full", false, "show every struct member and array element")
	fs.BoolVar(&f.workload, "workload", false, "trace trawl's small built-in workload (files, pipes, loopback TCP) as the command")
}

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trawl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f traceFlags
	f.register(fs)
	fs.Usage = func() {
		usage(stderr)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	patterns, command, err := parseUntilDash(fs, args)
	if err != nil {
		return err
	}
	if len(patterns) == 0 {
		return fmt.Errorf("%w: no pattern: say which functions to trace, e.g. trawl 'tcp_*'", errUsage)
	}
	if f.workload {
		if len(command) > 0 {
			return fmt.Errorf("%w: --workload and a command cannot go together", errUsage)
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		command = []string{exe, workloadCommand}
	}
	if len(command) > 0 && f.pid != 0 {
		return fmt.Errorf("%w: -p and a command cannot go together", errUsage)
	}
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	out := stdout
	if f.output != "" {
		file, err := os.Create(f.output)
		if err != nil {
			return err
		}
		defer file.Close()
		out = file
	}
	r, err := f.renderer(out)
	if err != nil {
		return err
	}

	var child *gatedCommand
	cfg := trawl.Config{Patterns: patterns, Backend: f.backend, Comm: f.comm, Cgroup: f.cgroup, MinDuration: f.minDur, Errors: f.errors, Filter: f.filter}
	cfg.Decode.Depth, cfg.Decode.MaxBytes, cfg.Decode.Full = f.depth, f.maxBytes, f.full
	if f.pid != 0 {
		cfg.PIDs = []int{f.pid}
	}
	if len(command) > 0 {
		if child, err = startGated(command, stdout, stderr); err != nil {
			return err
		}
		defer child.kill()
		cfg.PIDs = []int{child.cmd.Process.Pid}
	}
	cfg.Progress = progress(stderr, time.Now())
	cfg.Notify = func(n string) { fmt.Fprintln(stderr, "trawl:", n) }
	s, err := trawl.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	st, _ := s.Stats()
	fmt.Fprintf(stderr, "trawl: tracing %d functions with %s", st.Attached, s.Backend)
	if len(st.Skipped) > 0 {
		fmt.Fprintf(stderr, " (%d skipped, see the summary at the end)", countSkipped(st.Skipped))
	}
	fmt.Fprintln(stderr)

	done := make(chan error, 1)
	if child != nil {
		if err := child.release(); err != nil {
			return err
		}
		go func() { done <- child.cmd.Wait() }()
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case err := <-done:
			if err != nil {
				fmt.Fprintf(stderr, "trawl: command: %v\n", err)
			}
		}
		close(stop)
	}()
	readErr := readCalls(s, r, stop)
	st, statsErr := s.Stats()
	closeErr := s.Close()
	renderErr := r.Close()
	summary(stderr, st)
	return errors.Join(readErr, statsErr, closeErr, renderErr)
}

// readCalls renders calls until stop is closed and the ring buffer is
// drained. A blocked read does not see a new deadline, so reads wait in
// short rounds.
func readCalls(s *trawl.Session, r render.Renderer, stop <-chan struct{}) error {
	var c trawl.Call
	stopping := false
	for {
		s.SetDeadline(time.Now().Add(100 * time.Millisecond))
		err := s.Read(&c)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			if stopping {
				return nil
			}
			select {
			case <-stop:
				stopping = true
			default:
			}
		case errors.Is(err, ringbuf.ErrClosed):
			return nil
		case err != nil:
			return err
		default:
			if err := r.Call(&c); err != nil {
				return err
			}
		}
	}
}

// renderer picks the output format.
func (f *traceFlags) renderer(w io.Writer) (render.Renderer, error) {
	opts := render.Options{}
	if file, ok := w.(*os.File); ok && f.output == "" && render.IsTerminal(file.Fd()) && os.Getenv("NO_COLOR") == "" {
		opts.Color = true
	}
	if off, err := render.WallOffset(); err == nil {
		opts.WallOffset = off
	}
	n := 0
	for _, set := range []bool{f.json, f.tree, f.perfetto != "", f.stats} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("%w: choose one of --json, --tree, --perfetto and --stats", errUsage)
	}
	switch {
	case f.json:
		return render.NewJSON(w, opts), nil
	case f.tree:
		return render.NewTree(w, opts), nil
	case f.perfetto != "":
		file, err := os.Create(f.perfetto)
		if err != nil {
			return nil, err
		}
		return &closingRenderer{render.NewPerfetto(file), file}, nil
	case f.stats:
		return render.NewStats(w, render.StatsOptions{Options: opts, Interval: f.interval, SortBy: f.sortBy, Histogram: f.hist})
	}
	return render.NewText(w, opts), nil
}

// closingRenderer closes the file it writes to.
type closingRenderer struct {
	render.Renderer
	file *os.File
}

func (c *closingRenderer) Close() error { return errors.Join(c.Renderer.Close(), c.file.Close()) }

// progress reports attach progress on stderr once attaching has taken
// more than a second.
func progress(w io.Writer, start time.Time) func(done, total int) {
	last := start
	return func(done, total int) {
		now := time.Now()
		if now.Sub(start) < time.Second || (now.Sub(last) < time.Second && done < total) {
			return
		}
		last = now
		fmt.Fprintf(w, "trawl: attached %d of %d (%.1fs)\n", done, total, now.Sub(start).Seconds())
	}
}

func countSkipped(skipped map[string][]string) int {
	n := 0
	for _, fns := range skipped {
		n += len(fns)
	}
	return n
}

// summary writes what was seen and lost.
func summary(w io.Writer, st trawl.Stats) {
	fmt.Fprintf(w, "trawl: %d calls, %d dropped (ring buffer full), %d functions attached, %d skipped\n",
		st.Calls, st.Drops, st.Attached, countSkipped(st.Skipped))
	fmt.Fprintf(w, "trawl: filtered in the kernel: %d by task (pid, comm, cgroup), %d by --filter, %d by --min-duration or --errors\n",
		st.Filtered, st.FilteredExpr, st.FilteredExit)
	fmt.Fprintf(w, "trawl: missed: %d entries without task storage, %d calls nested too deep, %d exits without entry, %d entries without exit\n",
		st.MissStorage, st.MissDepth, st.MissEntry, st.MissExit)
	if st.CookieLookups > 0 {
		fmt.Fprintf(w, "trawl: %d kprobe runs found their function by the attach cookie, slower than by address\n", st.CookieLookups)
	}
	var progs []string
	for p, n := range st.RecursionMisses {
		progs = append(progs, fmt.Sprintf("%s %d", p, n))
	}
	sort.Strings(progs)
	fmt.Fprintf(w, "trawl: recursion misses: %s\n", strings.Join(progs, ", "))
	var reasons []string
	for r := range st.Skipped {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool { return len(st.Skipped[reasons[i]]) > len(st.Skipped[reasons[j]]) })
	for _, r := range reasons {
		fns := st.Skipped[r]
		fmt.Fprintf(w, "trawl: skipped %d: %s (e.g. %s)\n", len(fns), r, strings.Join(fns[:min(3, len(fns))], ", "))
	}
}

// gatedCommand is a command started but held before exec until its pid is
// traced, so its first calls are seen.
type gatedCommand struct {
	cmd  *exec.Cmd
	gate *os.File
}

// gateCommand is the hidden subcommand that waits on fd 3, then execs.
const gateCommand = "__gate"

func startGated(command []string, stdout, stderr io.Writer) (*gatedCommand, error) {
	path, err := exec.LookPath(command[0])
	if err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{gateCommand, path}, command...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start %s: %w", command[0], err)
	}
	r.Close()
	return &gatedCommand{cmd: cmd, gate: w}, nil
}

// release lets the command exec.
func (g *gatedCommand) release() error {
	_, err := g.gate.Write([]byte{1})
	g.gate.Close()
	return err
}

func (g *gatedCommand) kill() {
	g.gate.Close()
	if g.cmd.ProcessState == nil {
		g.cmd.Process.Kill()
		g.cmd.Wait()
	}
}

// runGate waits for trawl to release it, then becomes the command.
func runGate(_ context.Context, args []string, _, _ io.Writer) error {
	if len(args) < 2 {
		return fmt.Errorf("%w: %s PATH ARGV...", errUsage, gateCommand)
	}
	gate := os.NewFile(3, "gate")
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 {
		// trawl went away before releasing the command.
		os.Exit(1)
	}
	gate.Close()
	return syscall.Exec(args[0], args[1:], os.Environ())
}
