// SPDX-License-Identifier: Apache-2.0

// Command trawl-bench measures trawl in a test bed guest and prints the
// results as Markdown tables (`make bench KERNEL=...` runs it):
//
//   - attach: how long trawl.Open takes to attach N functions, and Close to
//     detach them, per backend, for N = 10, 100, 1000 and every traceable
//     function;
//   - fentry vs bpftrace: trawl's fentry backend against Debian's bpftrace
//     (shared into the guest by `vmrun -bpftrace`) attaching kfunc probes
//     one by one to the same N functions;
//   - attach against the floor: for every function, the open time of the
//     backends that attach with one link set against creating the same
//     links for empty programs;
//   - overview: a workload's slowdown under trawl counting every function
//     in the kernel and under bpftrace's kprobe:* count;
//   - reader: how many records per second trawl reads and writes as
//     JSON against a reader that only consumes the same ring buffer, and
//     what each drops while a loop of calls runs;
//   - per call: the cost of trawl's capture program on a cheap function
//     with scalar arguments, against an empty program of the same attach
//     type and against no program at all, measured in the same run;
//   - tracepoints: the time to attach N tracepoints (trawl.Open, the trawl
//     command, empty programs as trawl attaches them, bpftrace), and the
//     per-call cost of a tracepoint under trawl, an empty program and
//     none.
//
// Under TCG emulation absolute times say little: compare the ratios.
//
// The bench drives trawl through its public API. It reaches into internal
// packages only for what that API does not offer: internal/kernel holds
// the catalogue for the whole run, so that each trawl.Open reuses it as an
// embedder's later sessions do, and lends the bench the catalogue's counts
// and the kernel's memory; internal/selector times the selection alone and
// gives the floors the addresses and BTF ids of what trawl selected (the
// deny list included) without planning every function as trawl.List does;
// internal/kernel/rawbpf and internal/backend load and attach the empty
// and floor programs of the attach types cilium/ebpf lacks (fsession,
// tracing_multi) and resolve the session kfuncs as trawl does; and
// internal/vmtest/guest tells the test bed's kernel and bpftrace.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// allBackends are the backends measured by default, in table order: every
// one but auto. Backends the running kernel lacks show as "not supported".
var allBackends = func() (names []string) {
	for _, b := range trawl.Backends {
		if b != trawl.BackendAuto {
			names = append(names, string(b))
		}
	}
	return names
}()

// options are the command's flags.
type options struct {
	sizes       string
	backends    []string
	budget      time.Duration
	rounds      int
	callTarget  time.Duration
	skipAttach  bool
	skipCalls   bool
	skipVs      bool
	vsRounds    int
	profileDir  string
	floorRounds int
	skipOver    bool
	overLoops   int
	overRounds  int
	overLimit   time.Duration
	// tracepoints is how many tracepoints the attach part attaches (0:
	// no tracepoint measurements); skipFunctions leaves out what is
	// measured on functions.
	tracepoints   int
	skipFunctions bool
	skipReader    bool
	burst         int
	loop          int
}

func main() {
	// The trawl command's soft memory limit (memoryLimit in cmd/trawl),
	// so that the peak memory measured is the command's.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(160 << 20)
	}
	var o options
	flag.StringVar(&o.sizes, "n", "10,100,1000,all", "function counts to attach, comma-separated; all means every traceable function")
	backends := flag.String("backends", strings.Join(allBackends, ","), "backends to measure, comma-separated")
	flag.DurationVar(&o.budget, "attach-budget", 6*time.Minute, "attach N functions only if the time per function between the previous two sizes predicts it takes less than this")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds of per-call measurements")
	flag.DurationVar(&o.callTarget, "call-time", 300*time.Millisecond, "time each per-call measurement aims to take")
	flag.BoolVar(&o.skipAttach, "skip-attach", false, "skip the attach measurements")
	flag.BoolVar(&o.skipCalls, "skip-calls", false, "skip the per-call measurements")
	flag.BoolVar(&o.skipVs, "skip-bpftrace", false, "skip comparing trawl's fentry attach with bpftrace's")
	flag.IntVar(&o.vsRounds, "bpftrace-rounds", 2, "runs of each fentry vs bpftrace measurement; the fastest counts")
	flag.StringVar(&o.profileDir, "profiles", "", "write the CPU profile of each trawl.Open of the attach bench, and the heap profile of the open session, into this `dir`ectory, as BACKEND-N-cpu.pprof and BACKEND-N-heap.pprof; and of the reader bench's drains, as reader-BACKEND-cpu.pprof")
	flag.IntVar(&o.floorRounds, "floor-rounds", 1, "rounds of trawl and the empty links in turn on every function, for the floor table; the fastest of each counts")
	flag.BoolVar(&o.skipOver, "skip-overview", false, "skip timing a workload under trawl --stats '*' and bpftrace kprobe:*")
	flag.IntVar(&o.overLoops, "overview-loops", 100, "loops of the overview workload")
	flag.IntVar(&o.overRounds, "overview-rounds", 3, "runs of the overview workload per tracer; the fastest counts")
	flag.DurationVar(&o.overLimit, "overview-limit", 15*time.Minute, "time the workload runs under bpftrace may take in all")
	flag.IntVar(&o.tracepoints, "tracepoints", 200, "tracepoints to attach in the attach part; 0 leaves the tracepoint measurements out")
	flag.BoolVar(&o.skipFunctions, "skip-functions", false, "measure tracepoints only: skip the per-call, attach, bpftrace and overview measurements on functions")
	flag.BoolVar(&o.skipReader, "skip-reader", false, "skip measuring how fast trawl reads calls against a reader that only consumes the ring buffer")
	flag.IntVar(&o.burst, "reader-burst", 100000, "calls of the burst that fills the ring buffer for the reader's records per second")
	flag.IntVar(&o.loop, "reader-loop", 200000, "calls of the getppid loop traced live by the reader bench")
	getppid := flag.Int("getppid-loop", 0, "only call getppid(2) this `many` times on the last CPU and exit: the workload of the reader bench's trawl command")
	flag.Parse()
	if *getppid > 0 {
		if err := runGetppidLoop(*getppid); err != nil {
			fmt.Fprintln(os.Stderr, "trawl-bench:", err)
			os.Exit(1)
		}
		return
	}
	o.backends = strings.Split(*backends, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "trawl-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	for _, b := range o.backends {
		if !slices.Contains(allBackends, b) {
			return fmt.Errorf("unknown backend %q in -backends: want some of %s", b, strings.Join(allBackends, ", "))
		}
	}
	start := time.Now()
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		return fmt.Errorf("load the catalogue: %w", err)
	}
	defer release()
	loadTime := time.Since(start)
	fmt.Printf("## %s\n\n", describeHost())
	if v := version(); v != "" {
		fmt.Printf("%s\n\n", v)
	}
	fmt.Printf("Catalogue: %d functions, %d traceable; loaded in %s.\n\n", len(cat.Functions()), countTraceable(cat), round(loadTime))
	// Per-call first: attaching thousands of functions is what may bring
	// an emulated guest down.
	if !o.skipCalls && !o.skipFunctions {
		if err := benchCalls(ctx, o.backends, o.rounds, o.callTarget); err != nil {
			return err
		}
		if err := benchBuffer(ctx, o.backends, o.rounds, o.callTarget); err != nil {
			return err
		}
	}
	if !o.skipCalls && o.tracepoints > 0 {
		if err := benchTracepointCalls(ctx, o.rounds, o.callTarget); err != nil {
			return err
		}
	}
	if o.tracepoints < 0 {
		return fmt.Errorf("-tracepoints must not be negative, not %d", o.tracepoints)
	}
	if o.vsRounds < 1 {
		return fmt.Errorf("-bpftrace-rounds must be at least 1, not %d", o.vsRounds)
	}
	if !o.skipAttach && !o.skipFunctions {
		if o.floorRounds < 1 {
			return fmt.Errorf("-floor-rounds must be at least 1, not %d", o.floorRounds)
		}
		ns, err := parseSizes(o.sizes)
		if err != nil {
			return err
		}
		names := eligible(cat)
		if err := benchAttach(ctx, cat, o.backends, names, ns, o.budget, o.profileDir, o.floorRounds); err != nil {
			return err
		}
		if !o.skipVs && slices.Contains(o.backends, string(trawl.BackendFentry)) {
			if err := benchVersusBpftrace(ctx, cat, names, ns, o.budget, o.vsRounds); err != nil {
				return err
			}
		}
	}
	if !o.skipAttach && o.tracepoints > 0 {
		if err := benchTracepointAttach(ctx, cat, o.tracepoints, o.vsRounds, !o.skipVs); err != nil {
			return err
		}
	}
	if !o.skipReader && !o.skipFunctions {
		if o.burst < 1 || o.loop < 1 {
			return fmt.Errorf("-reader-burst and -reader-loop must be at least 1")
		}
		if err := benchReader(ctx, o.backends, o.rounds, o.burst, o.loop, o.profileDir); err != nil {
			return err
		}
	}
	if !o.skipOver && !o.skipFunctions {
		if o.overLoops < 1 || o.overRounds < 1 {
			return fmt.Errorf("-overview-loops and -overview-rounds must be at least 1")
		}
		if err := benchOverview(ctx, cat, o.overLoops, o.overRounds, o.overLimit); err != nil {
			return err
		}
	}
	fmt.Printf("Total bench time: %s.\n", round(time.Since(start)))
	return nil
}

// describeHost names the guest kernel, its release and the CPUs.
func describeHost() string {
	var u unix.Utsname
	release := "?"
	if unix.Uname(&u) == nil {
		release = unix.ByteSliceToString(u.Release[:])
	}
	name := guest.Kernel()
	if name == "" {
		name = runtime.GOARCH
	}
	return fmt.Sprintf("%s (Linux %s, %s, %d CPUs)", name, release, runtime.GOARCH, runtime.NumCPU())
}

// version names the commit the bench was built from, "" when the build
// did not record it.
func version() string {
	v := trawl.Version()
	if len(v.Commit) < 7 {
		return ""
	}
	dirty := ""
	if v.Modified {
		dirty = " with uncommitted changes"
	}
	return "trawl at commit " + v.Commit[:7] + dirty + "."
}

func countTraceable(cat *kernel.Catalogue) int {
	n := 0
	for _, fn := range cat.Functions() {
		if fn.Traceable {
			n++
		}
	}
	return n
}

// allFunctions stands for "every traceable function" in the sizes.
const allFunctions = -1

func parseSizes(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		if f == "all" {
			ns = append(ns, allFunctions)
			continue
		}
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("bad function count %q in -n", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// round shortens a duration for tables.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}

// lookup returns the function called name, as trawl.List finds it.
func lookup(name string) (trawl.Function, error) {
	sel, err := trawl.List([]string{name}, trawl.ListOptions{})
	if err != nil {
		return trawl.Function{}, fmt.Errorf("find %s: %w", name, err)
	}
	if len(sel.Selected) == 0 {
		return trawl.Function{}, fmt.Errorf("find %s: the kernel has no such traceable function", name)
	}
	return sel.Selected[0], nil
}

// notSupported reports whether err says the kernel lacks a backend.
func notSupported(err error) bool { return errors.Is(err, ebpf.ErrNotSupported) }

// summary says what a round measured, or why it failed, for the log.
func summary(r fmt.Stringer, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return r.String()
}

// failedRow writes backend b's row of a table when err says why b has no
// measurements, and reports whether it did.
func failedRow(t *measure.Table, b string, err error) bool {
	switch {
	case err == nil:
		return false
	case notSupported(err):
		t.Row(b, "not supported by this kernel")
	default:
		t.Row(b, "error: "+oneLine(err))
	}
	return true
}
