// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/render"
	"github.com/trawl-dev/trawl/internal/selector"
)

// traceFlags are the flags of the tracing command.
type traceFlags struct {
	backend  string
	pids     []int
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
	// set holds the names of the flags given on the command line.
	set map[string]bool
}

// Ranges of the numeric display flags.
const (
	maxDepth    = 16
	maxMaxBytes = 512 // the most the capture program copies behind one pointer
)

func (f *traceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "auto", "attach with `BACKEND`: "+strings.Join(trawl.Backends, ", ")+" (trawl features PATTERN... shows what auto picks)")
	fs.Func("p", "trace only process `PID` and its children (repeatable)", func(s string) error {
		pid, err := parsePID(s)
		f.pids = append(f.pids, pid)
		return err
	})
	fs.StringVar(&f.comm, "comm", "", "trace only tasks named `NAME`")
	fs.StringVar(&f.cgroup, "cgroup", "", "trace only tasks in the cgroup v2 directory `PATH` (not its children)")
	fs.DurationVar(&f.minDur, "min-duration", 0, "show only calls that take at least `D` (e.g. 1ms)")
	fs.BoolVar(&f.errors, "errors", false, "show only calls that return an error (negative errno, NULL or ERR_PTR)")
	fs.StringVar(&f.filter, "filter", "", "show only calls for which `EXPR` holds, e.g. 'skb->len > 1000 && ret < 0' or 'filename ~ \"/tmp/*\"' (see README)")
	fs.DurationVar(&f.duration, "duration", 0, "stop this long after tracing begins (default: until Ctrl-C or the command exits)")
	fs.BoolVar(&f.json, "json", false, "write one JSON object per call (schema: docs/json-schema.md)")
	fs.BoolVar(&f.tree, "tree", false, "write a call tree per task")
	fs.StringVar(&f.perfetto, "perfetto", "", "write a Perfetto trace (protobuf) to `FILE`")
	fs.BoolVar(&f.stats, "stats", false, "write per-function counts, errors and latency percentiles")
	fs.DurationVar(&f.interval, "interval", 0, "with --stats, refresh the table this often")
	fs.StringVar(&f.sortBy, "sort", "count", "with --stats, sort by `COLUMN`: "+strings.Join(render.SortColumns, ", "))
	fs.StringVar(&f.hist, "hist", "", "with --stats, show the latency histogram of `FUNC`")
	fs.StringVar(&f.output, "o", "", "write to `FILE` instead of standard output")
	fs.IntVar(&f.depth, "depth", 0, fmt.Sprintf("levels of nested structs shown, 1 to %d (default 2)", maxDepth))
	fs.IntVar(&f.maxBytes, "max-bytes", 0, fmt.Sprintf("longest string shown, 1 to %d bytes (default 64)", maxMaxBytes))
	fs.BoolVar(&f.full, "full", false, "show every struct member and array element")
	fs.BoolVar(&f.workload, "workload", false, "trace trawl's small built-in workload (files, pipes, loopback TCP) as the command")
}

// parsePID parses a process id: a positive decimal no larger than the
// kernel's pid_max.
func parsePID(s string) (int, error) {
	pid, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a process id: %q", s)
	}
	if pid <= 0 || pid > pidMax() {
		return 0, fmt.Errorf("process id %d out of range (1 to %d)", pid, pidMax())
	}
	return int(pid), nil
}

// validate refuses flag combinations and values that cannot work, before
// anything is opened, loaded or written.
func (f *traceFlags) validate(command []string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	if f.workload && len(command) > 0 {
		return bad("--workload and a command cannot go together")
	}
	if len(f.pids) > 0 && (len(command) > 0 || f.workload) {
		return bad("-p and a command cannot go together")
	}
	for _, pid := range f.pids {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return bad("-p %d: no such process", pid)
		}
	}
	if f.set["duration"] && f.duration <= 0 {
		return bad("--duration must be positive, got %v", f.duration)
	}
	if f.set["interval"] && f.interval <= 0 {
		return bad("--interval must be positive, got %v", f.interval)
	}
	if f.set["min-duration"] && f.minDur < 0 {
		return bad("--min-duration cannot be negative, got %v", f.minDur)
	}
	if f.set["depth"] && (f.depth < 1 || f.depth > maxDepth) {
		return bad("--depth must be 1 to %d, got %d", maxDepth, f.depth)
	}
	if f.set["max-bytes"] && (f.maxBytes < 1 || f.maxBytes > maxMaxBytes) {
		return bad("--max-bytes must be 1 to %d, got %d", maxMaxBytes, f.maxBytes)
	}
	if len(f.comm) > 15 {
		return bad("--comm %q is longer than the kernel's 15 characters", f.comm)
	}
	n := 0
	for _, set := range []bool{f.json, f.tree, f.perfetto != "", f.stats} {
		if set {
			n++
		}
	}
	if n > 1 {
		return bad("choose one of --json, --tree, --perfetto and --stats")
	}
	for _, name := range []string{"interval", "sort", "hist"} {
		if f.set[name] && !f.stats {
			return bad("--%s needs --stats", name)
		}
	}
	if f.set["sort"] && !slices.Contains(render.SortColumns, f.sortBy) {
		return bad("--sort %q: want one of %s", f.sortBy, strings.Join(render.SortColumns, ", "))
	}
	if f.perfetto != "" && f.output != "" {
		return bad("--perfetto names its own file: -o cannot go with it")
	}
	for _, path := range []string{f.output, f.perfetto} {
		if err := checkWritable(path); err != nil {
			return err
		}
	}
	return nil
}

// checkWritable checks that path ("" for none) can be created or
// overwritten, without touching it.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%w: %s is a directory", errUsage, path)
		}
		if err := syscall.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		return nil
	}
	dir := filepath.Dir(path)
	if err := syscall.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("cannot create %s: directory %s: %w", path, dir, err)
	}
	return nil
}

// Exit statuses besides 0, 1 and 2 (usage) and the traced command's own.
const (
	exitNotFound    = 127 // the command was not found
	exitNotRunnable = 126 // the command could not be run
	exitSignal      = 128 // + the signal's number: interrupted before tracing began
)

// exitError makes trawl exit with a status, printing msg if not empty.
type exitError struct {
	status int
	msg    string
}

func (e *exitError) Error() string { return e.msg }

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trawl", flag.ContinueOnError)
	// Flag errors are returned and printed once, on one line.
	fs.SetOutput(io.Discard)
	f := traceFlags{set: map[string]bool{}}
	f.register(fs)
	patterns, command, err := parseUntilDash(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		fmt.Fprintln(stdout, "\nflags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if len(patterns) == 0 {
		return fmt.Errorf("%w: no pattern: say which functions to trace, e.g. trawl 'tcp_*'", errUsage)
	}
	if err := f.validate(command); err != nil {
		return err
	}
	if f.workload {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		command = []string{exe, workloadCommand}
	}
	if f.hist != "" {
		if err := checkHist(patterns, f.hist); err != nil {
			return err
		}
	}
	if allExclusions(patterns) {
		fmt.Fprintln(stderr, "trawl: every pattern is an exclusion: selecting every traceable function but those")
	}

	var child *gatedCommand
	cfg := trawl.Config{Patterns: patterns, Backend: f.backend, PIDs: f.pids, Comm: f.comm, Cgroup: f.cgroup, MinDuration: f.minDur, Errors: f.errors, Filter: f.filter}
	cfg.Decode.Depth, cfg.Decode.MaxBytes, cfg.Decode.Full = f.depth, f.maxBytes, f.full
	if len(command) > 0 {
		if child, err = startGated(command, stdout, stderr); err != nil {
			return err
		}
		defer child.kill()
		cfg.PIDs = []int{child.cmd.Process.Pid}
	}
	cfg.Progress = attachProgress(stderr, time.Now())
	cfg.DetachProgress = detachProgress(stderr)
	cfg.Notify = func(n string) { fmt.Fprintln(stderr, "trawl:", n) }
	s, err := trawl.Open(ctx, cfg)
	if err != nil {
		if oe := (*trawl.OpenError)(nil); errors.As(err, &oe) {
			summary(stderr, oe.Stats)
		}
		return startError(ctx, err)
	}
	defer func() {
		// After a second interrupt the kernel detaches as trawl exits.
		if !hurried(ctx) {
			s.Close()
		}
	}()
	// The trace is armed: outputs are created only now, so that a run
	// that never starts leaves existing files alone.
	out, closeOut, err := f.open(stdout)
	if err != nil {
		return err
	}
	defer closeOut()
	r, err := f.renderer(out)
	if err != nil {
		return err
	}
	st, _ := s.Stats()
	fmt.Fprintf(stderr, "trawl: tracing %d functions with %s", st.Attached, s.Backend)
	if len(st.Skipped) > 0 {
		fmt.Fprintf(stderr, " (%d skipped, see the summary at the end)", countSkipped(st.Skipped))
	}
	fmt.Fprintln(stderr)

	stop := newStopper(ctx)
	defer stop.release()
	if f.duration > 0 {
		stop.after(f.duration, "duration")
	}
	if child != nil {
		if err := child.release(); err != nil {
			return err
		}
		go func() {
			<-child.exited
			stop.now("command exited")
		}()
	}
	readErr := readCalls(s, r, stop)
	return finish(ctx, s, r, stop, child, readErr, stderr)
}

// finish ends a trace that was stopped: the program is disarmed, what is
// already in the ring buffer is shown (for at most drainTime, none after
// a second interrupt), the output flushed, the summary printed, then
// everything detached.
func finish(ctx context.Context, s *trawl.Session, r render.Renderer, stop *stopper, child *gatedCommand, readErr error, stderr io.Writer) error {
	stopErr := s.Stop()
	if why := stop.why(); why != "" {
		fmt.Fprintf(stderr, "trawl: stopping: %s\n", why)
	}
	pipeClosed := errors.Is(readErr, syscall.EPIPE)
	if readErr == nil && !hurried(ctx) {
		readErr = drain(s, r, time.Now().Add(drainTime), hurryChan(ctx))
	}
	if _, err := s.Discard(); err != nil && readErr == nil {
		readErr = err
	}
	renderErr := r.Close()
	if pipeClosed || errors.Is(renderErr, syscall.EPIPE) {
		pipeClosed, readErr, renderErr = true, nil, nil
	}
	st, statsErr := s.Stats()
	summary(stderr, st)
	if pipeClosed {
		fmt.Fprintln(stderr, "trawl: the output's reader went away: stopped")
	}
	if hurried(ctx) {
		// A second interrupt: leave the detaching to the kernel as our
		// descriptors close.
		return &exitError{status: exitSignal + int(signalOf(ctx)), msg: "interrupted twice: exiting without waiting for the detach"}
	}
	markDetaching(ctx)
	if child != nil {
		child.terminate()
	}
	closeErr := s.Close()
	if final, err := s.Stats(); err == nil {
		lateSummary(stderr, st, final)
	}
	if err := errors.Join(readErr, stopErr, statsErr, closeErr, renderErr); err != nil {
		return err
	}
	if child != nil {
		return child.status()
	}
	return nil
}

// drainTime bounds how long a stopped trace keeps showing the calls
// already in the ring buffer; the rest are counted as not shown.
const drainTime = 500 * time.Millisecond

// flushEvery is the longest output waits in a buffer while calls flow.
const flushEvery = 100 * time.Millisecond

// readCalls renders calls until stop fires, flushing the output at least
// every flushEvery and whenever the ring buffer runs empty.
func readCalls(s *trawl.Session, r render.Renderer, stop *stopper) error {
	var c trawl.Call
	flushed := time.Now()
	s.SetDeadline(flushed.Add(flushEvery))
	for !stop.fired() {
		err := s.Read(&c)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Idle (or the deadline passed as the buffer ran empty).
		case errors.Is(err, trawl.ErrClosed):
			return nil
		case err != nil:
			return err
		default:
			if err := r.Call(&c); err != nil {
				return err
			}
			if time.Since(flushed) < flushEvery {
				continue
			}
		}
		if err := r.Flush(); err != nil {
			return err
		}
		flushed = time.Now()
		s.SetDeadline(flushed.Add(flushEvery))
	}
	return nil
}

// drain renders the calls waiting in the ring buffer until it is empty,
// until the deadline, or until hurry closes.
func drain(s *trawl.Session, r render.Renderer, deadline time.Time, hurry <-chan struct{}) error {
	var c trawl.Call
	s.SetDeadline(time.Now())
	for time.Now().Before(deadline) {
		select {
		case <-hurry:
			return nil
		default:
		}
		err := s.Read(&c)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, trawl.ErrClosed):
			return nil
		case err != nil:
			return err
		}
		if err := r.Call(&c); err != nil {
			return err
		}
	}
	return nil
}

// startError words an error of Open for the user: an interrupt is
// "interrupted", with the status of the signal.
func startError(ctx context.Context, err error) error {
	if sig := signalOf(ctx); sig != 0 && errors.Is(err, context.Canceled) {
		return &exitError{status: exitSignal + int(sig), msg: "interrupted before tracing began"}
	}
	return err
}

// open creates the output file of -o, or returns stdout.
func (f *traceFlags) open(stdout io.Writer) (io.Writer, func(), error) {
	if f.output == "" {
		return stdout, func() {}, nil
	}
	file, err := os.Create(f.output)
	if err != nil {
		return nil, nil, err
	}
	return file, func() { file.Close() }, nil
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
		return &closingRenderer{render.NewPerfettoProto(file, opts), file}, nil
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

// attachProgress reports attach progress on stderr once more than a
// second has passed since start, at most once a second.
func attachProgress(w io.Writer, start time.Time) func(attached, skipped, total int) {
	report := every(time.Second, start)
	return func(attached, skipped, total int) {
		if elapsed, ok := report(attached+skipped == total); ok {
			fmt.Fprintf(w, "trawl: attached %d of %d functions, %d skipped (%.1fs)\n", attached, total, skipped, elapsed.Seconds())
		}
	}
}

// detachProgress reports detach progress on stderr the same way, from
// the first link closed.
func detachProgress(w io.Writer) func(done, total int) {
	report := every(time.Second, time.Time{})
	return func(done, total int) {
		if elapsed, ok := report(done == total); ok {
			fmt.Fprintf(w, "trawl: detached %d of %d links (%.1fs)\n", done, total, elapsed.Seconds())
		}
	}
}

// every returns a function that says, at each step, whether to report
// and the time since start (zero: the first step): after d has passed,
// at most every d, and at the last step.
func every(d time.Duration, start time.Time) func(last bool) (time.Duration, bool) {
	prev := start
	return func(last bool) (time.Duration, bool) {
		now := time.Now()
		if start.IsZero() {
			start, prev = now, now
		}
		if now.Sub(start) < d || (now.Sub(prev) < d && !last) {
			return 0, false
		}
		prev = now
		return now.Sub(start), true
	}
}

// checkHist checks that --hist names a function the patterns select.
func checkHist(patterns []string, name string) error {
	cat, err := kernel.Live()
	if err != nil {
		return err
	}
	sel, err := selector.Select(cat, patterns)
	if err != nil {
		return err
	}
	if !sel.Has(name) {
		return fmt.Errorf("%w: --hist %s: not among the selected functions", errUsage, name)
	}
	return nil
}

func allExclusions(patterns []string) bool {
	for _, p := range patterns {
		if !strings.HasPrefix(p, "!") {
			return false
		}
	}
	return true
}
