// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
)

// callFunc is the function whose calls are measured: int -> int, so that
// trawl copies no memory, and called once by every BPF_PROG_TEST_RUN of a
// tracing program.
const callFunc = "bpf_fentry_test1"

// returnZero is the empty program: return 0.
var returnZero = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}

// empties attach, for a backend, empty programs of the same attach types
// to a function, given its name, addresses and BTF id.
var empties = map[string]func(fn *kernel.Function) ([]io.Closer, error){
	string(trawl.BackendFentry): func(fn *kernel.Function) ([]io.Closer, error) {
		return attachEmpty(fn.Name, func(p *ebpf.Program, t ebpf.AttachType) (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: p, AttachType: t})
		}, ebpf.Tracing, ebpf.AttachTraceFExit, ebpf.AttachTraceFEntry)
	},
	string(trawl.BackendKprobeMulti): func(fn *kernel.Function) ([]io.Closer, error) {
		opts := kprobeOptions(fn)
		ret := true
		return attachEmpty(fn.Name, func(p *ebpf.Program, _ ebpf.AttachType) (link.Link, error) {
			if ret {
				ret = false
				return link.KretprobeMulti(p, opts)
			}
			return link.KprobeMulti(p, opts)
		}, ebpf.Kprobe, ebpf.AttachTraceKprobeMulti, ebpf.AttachTraceKprobeMulti)
	},
	string(trawl.BackendKprobe): func(fn *kernel.Function) ([]io.Closer, error) {
		ret := true
		return attachEmpty(fn.Name, func(p *ebpf.Program, _ ebpf.AttachType) (link.Link, error) {
			if ret {
				ret = false
				return link.Kretprobe(fn.Name, p, nil)
			}
			return link.Kprobe(fn.Name, p, nil)
		}, ebpf.Kprobe, ebpf.AttachNone, ebpf.AttachNone)
	},
	string(trawl.BackendKprobeSession): func(fn *kernel.Function) ([]io.Closer, error) {
		opts := kprobeOptions(fn)
		opts.Session = true
		return attachEmpty(fn.Name, func(p *ebpf.Program, _ ebpf.AttachType) (link.Link, error) {
			return link.KprobeMulti(p, opts)
		}, ebpf.Kprobe, ebpf.AttachTraceKprobeSession)
	},
	// An fsession program returning 0 runs at exit too, as trawl's does.
	string(trawl.BackendFsession): func(fn *kernel.Function) ([]io.Closer, error) {
		return attachRaw(rawbpf.TracingSpec{AttachType: rawbpf.AttachTraceFSession, AttachBTFID: fn.BTFID}, func(p *ebpf.Program) (link.Link, error) {
			return rawbpf.AttachTracing(p, rawbpf.AttachTraceFSession, 0)
		})
	},
	string(trawl.BackendTracingMulti): func(fn *kernel.Function) ([]io.Closer, error) {
		return attachRaw(rawbpf.TracingSpec{AttachType: rawbpf.AttachTraceFSessionMulti}, func(p *ebpf.Program) (link.Link, error) {
			return rawbpf.AttachTracingMulti(p, rawbpf.AttachTraceFSessionMulti, []btf.TypeID{fn.BTFID}, nil)
		})
	},
}

// gatedEmpties attach, for a backend whose programs differ with --entry,
// empty programs of the attach types it then uses: fsession attaches an
// fentry and an fexit program with --entry.
var gatedEmpties = map[string]func(fn *kernel.Function) ([]io.Closer, error){
	string(trawl.BackendFsession): empties[string(trawl.BackendFentry)],
}

// floorProgs are, per backend, the programs of internal/bpf/floor.c that
// do the least a tracer of that kind must do to report a call: exit first,
// as trawl attaches.
var floorProgs = map[string][]string{
	string(trawl.BackendFentry):      {bpf.FloorProgFloorFexit, bpf.FloorProgFloorFentry},
	string(trawl.BackendKprobeMulti): {bpf.FloorProgFloorKretprobe, bpf.FloorProgFloorKprobe},
}

// statsFloorProgs are, per backend, the programs of internal/bpf/floor.c
// that do the least a tracer must do to count a call and its duration in
// the kernel (the stats floor), in the same order. tracing-multi attaches
// the fsession program with a tracing_multi link, as trawl does.
var statsFloorProgs = map[string][]string{
	string(trawl.BackendFentry):        {bpf.FloorProgFloorStatsFexit, bpf.FloorProgFloorFentry},
	string(trawl.BackendKprobeMulti):   {bpf.FloorProgFloorStatsKretprobe, bpf.FloorProgFloorKprobe},
	string(trawl.BackendKprobeSession): {bpf.FloorProgFloorStatsKsession},
	string(trawl.BackendFsession):      {bpf.FloorProgFloorStatsFsession},
	string(trawl.BackendTracingMulti):  {bpf.FloorProgFloorStatsFsession},
}

// attachFloor loads and attaches the floor programs names of backend b to
// fn, and returns them with the stats floor's counts map, all to close.
// It returns nothing when names is empty.
func attachFloor(b string, names []string, fn *kernel.Function) ([]io.Closer, *ebpf.Map, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	spec, err := bpf.LoadFloor()
	if err != nil {
		return nil, nil, err
	}
	// cilium/ebpf cannot load fsession programs: its maps load here, the
	// program below, as trawl loads its own (internal/backend).
	fsession := spec.Programs[bpf.FloorProgFloorStatsFsession]
	for name := range spec.Programs {
		if !slices.Contains(names, name) || name == bpf.FloorProgFloorStatsFsession {
			delete(spec.Programs, name)
		}
	}
	if ps := spec.Programs[bpf.FloorProgFloorStatsKsession]; ps != nil {
		if err := backend.ResolveKfuncs(ps.Instructions); err != nil {
			return nil, nil, err
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("load the floor programs: %w", err)
	}
	// The programs keep their maps alive.
	defer coll.Close()
	counts, err := coll.Maps[bpf.FloorMapFloorCounts].Clone()
	if err != nil {
		return nil, nil, err
	}
	if slices.Contains(names, bpf.FloorProgFloorStatsFsession) {
		closers, err := attachFsessionFloor(b, fsession, coll.Maps, fn)
		if err != nil {
			counts.Close()
			return nil, nil, err
		}
		return append(closers, counts), counts, nil
	}
	closers := []io.Closer{counts}
	for _, name := range names {
		p := coll.DetachProgram(name)
		closers = append(closers, p)
		var l link.Link
		switch name {
		case bpf.FloorProgFloorKprobe:
			l, err = link.KprobeMulti(p, kprobeOptions(fn))
		case bpf.FloorProgFloorKretprobe, bpf.FloorProgFloorStatsKretprobe:
			l, err = link.KretprobeMulti(p, kprobeOptions(fn))
		case bpf.FloorProgFloorStatsKsession:
			opts := kprobeOptions(fn)
			opts.Session = true
			l, err = link.KprobeMulti(p, opts)
		default:
			l, err = link.AttachTracing(link.TracingOptions{Program: p})
		}
		if err != nil {
			closeAll(closers)
			return nil, nil, fmt.Errorf("attach the floor program %s: %w", name, err)
		}
		closers = slices.Insert(closers, 0, io.Closer(l))
	}
	return closers, counts, nil
}

// floorStats is struct floor_stats of internal/bpf/floor.c.
type floorStats struct {
	Calls, TotalNs uint64
	Hist           [64]uint64
}

// checkFloorCounted makes sure the stats floor counted every call, each
// in its histogram.
func checkFloorCounted(counts *ebpf.Map, want uint64) error {
	var perCPU []floorStats
	if err := counts.Lookup(uint32(0), &perCPU); err != nil {
		return fmt.Errorf("read the stats floor's counts: %w", err)
	}
	var calls, hist uint64
	for _, st := range perCPU {
		calls += st.Calls
		for _, n := range st.Hist {
			hist += n
		}
	}
	if calls != want || hist != want {
		return fmt.Errorf("the stats floor counted %d calls (%d in its histogram), want %d", calls, hist, want)
	}
	return nil
}

// attachFsessionFloor loads the fsession program of the stats floor with
// the floor's maps and attaches it to fn: with an fsession link, or for
// tracing-multi with a tracing_multi link.
func attachFsessionFloor(b string, ps *ebpf.ProgramSpec, maps map[string]*ebpf.Map, fn *kernel.Function) ([]io.Closer, error) {
	insns, err := backend.RawInstructions(ps, maps)
	if err != nil {
		return nil, err
	}
	spec := rawbpf.TracingSpec{Name: "floor_stats", AttachType: rawbpf.AttachTraceFSession, AttachBTFID: fn.BTFID, Instructions: insns, License: "GPL"}
	if b == string(trawl.BackendTracingMulti) {
		spec.AttachType, spec.AttachBTFID = rawbpf.AttachTraceFSessionMulti, 0
	}
	p, err := rawbpf.LoadTracing(&spec)
	if err != nil {
		return nil, fmt.Errorf("load the floor program %s: %w", ps.Name, err)
	}
	var l link.Link
	if b == string(trawl.BackendTracingMulti) {
		l, err = rawbpf.AttachTracingMulti(p, rawbpf.AttachTraceFSessionMulti, []btf.TypeID{fn.BTFID}, nil)
	} else {
		l, err = rawbpf.AttachTracing(p, rawbpf.AttachTraceFSession, 0)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("attach the floor program %s: %w", ps.Name, err)
	}
	return []io.Closer{l, p}, nil
}

// kprobeOptions attach a kprobe.multi link to fn's addresses.
func kprobeOptions(fn *kernel.Function) link.KprobeMultiOptions {
	var opts link.KprobeMultiOptions
	for _, a := range fn.Addrs {
		opts.Addresses = append(opts.Addresses, uintptr(a))
	}
	return opts
}

// attachRaw loads an empty tracing program of an attach type cilium/ebpf
// lacks, as spec says (its attach type and target), and attaches it.
func attachRaw(spec rawbpf.TracingSpec, attach func(*ebpf.Program) (link.Link, error)) ([]io.Closer, error) {
	t := spec.AttachType
	spec.Name, spec.Instructions, spec.License = "empty", returnZero, "GPL"
	p, err := rawbpf.LoadTracing(&spec)
	if err != nil {
		return nil, fmt.Errorf("load an empty %s program: %w", t, err)
	}
	l, err := attach(p)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("attach an empty %s program: %w", t, err)
	}
	return []io.Closer{l, p}, nil
}

// attachEmpty loads one empty program per attach type for function fn
// and attaches each with attach. It returns the links and programs, to
// be closed in order.
func attachEmpty(fn string, attach func(*ebpf.Program, ebpf.AttachType) (link.Link, error), typ ebpf.ProgramType, types ...ebpf.AttachType) ([]io.Closer, error) {
	var closers []io.Closer
	fail := func(err error) ([]io.Closer, error) {
		closeAll(closers)
		return nil, err
	}
	for _, t := range types {
		spec := &ebpf.ProgramSpec{Type: typ, AttachType: t, License: "GPL", Instructions: returnZero}
		if typ == ebpf.Tracing {
			spec.AttachTo = fn
		}
		p, err := ebpf.NewProgram(spec)
		if err != nil {
			return fail(fmt.Errorf("load an empty %s program: %w", t, err))
		}
		closers = append(closers, p)
		l, err := attach(p, t)
		if err != nil {
			return fail(fmt.Errorf("attach an empty %s program: %w", t, err))
		}
		closers = slices.Insert(closers, 0, io.Closer(l))
	}
	return closers, nil
}

func closeAll(cs []io.Closer) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// trigger calls callFunc once per test run of a tracing program, which the
// kernel never attaches.
type trigger struct{ prog *ebpf.Program }

func newTrigger() (*trigger, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTo: callFunc,
		License: "GPL", Instructions: returnZero,
	})
	if err != nil {
		return nil, fmt.Errorf("load the test-run program: %w", err)
	}
	return &trigger{p}, nil
}

// blocks is how many blocks a measurement is cut into. The fastest block
// is kept: load on the host of an emulated guest only ever slows a block
// down, by far more than the differences measured.
const blocks = 20

// perCall calls callFunc n/10 times to warm up, then n times in blocks,
// with the garbage collector off, and returns the time per call in ns of
// the fastest block.
func (t *trigger) perCall(n int) (float64, error) {
	opts := &ebpf.RunOptions{}
	return timePerCall(n, func() error {
		if _, err := t.prog.Run(opts); err != nil {
			return fmt.Errorf("test run: %w", err)
		}
		return nil
	})
}

// timePerCall makes call n/10 times to warm up, then n times in blocks,
// with the garbage collector off, and returns the time per call in ns of
// the fastest block.
func timePerCall(n int, call func() error) (float64, error) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	run := func(k int) (time.Duration, error) {
		start := time.Now()
		for range k {
			if err := call(); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	if _, err := run(n / 10); err != nil {
		return 0, err
	}
	best := math.Inf(1)
	for range blocks {
		d, err := run(n / blocks)
		if err != nil {
			return 0, err
		}
		best = min(best, float64(d.Nanoseconds())/float64(n/blocks))
	}
	return best, nil
}

// calls counts the calls perCall(n) makes.
func calls(n int) uint64 { return uint64(n/10 + n/blocks*blocks) }

// callSamples holds one backend's per-round measurements, ns per call.
type callSamples struct {
	base, empty, floor, trawl []float64 // floor stays empty without floor programs
	stats                     []float64 // trawl's session with Config.Aggregate (--stats)
	statsFloor                []float64 // the stats floor programs, where the backend has them
	show                      []float64 // trawl's session with one --show expression
	// gated is trawl with the function outside every --entry call, stack
	// trawl with --stack, untracked trawl with --track on trackFunc,
	// whose calls receive no tracked object, filtered the same session
	// without --track.
	gated, stack, untracked, filtered []float64
	// gatedEmpty is the empty programs of the attach types of gated, for
	// a backend whose programs differ with --entry (gatedEmpties).
	gatedEmpty []float64
	err        error
}

// benchCalls measures, in rounds, the time per call of callFunc with
// nothing attached, with empty programs and with trawl, for each backend,
// and prints the table. The measuring goroutine is pinned to CPU 0.
func benchCalls(ctx context.Context, cat *kernel.Catalogue, backends []string, rounds int, target time.Duration) error {
	fns := cat.Lookup(callFunc)
	if len(fns) == 0 {
		return fmt.Errorf("kernel has no %s", callFunc)
	}
	fn := fns[0]
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		return fmt.Errorf("pin to CPU 0: %w", err)
	}
	trig, err := newTrigger()
	if err != nil {
		return err
	}
	defer trig.prog.Close()

	// Size the runs so that a baseline measurement takes about target.
	probe, err := trig.perCall(2000)
	if err != nil {
		return err
	}
	n := min(max(int(float64(target.Nanoseconds())/probe), 2000), maxCalls)

	samples := map[string]*callSamples{}
	for _, b := range backends {
		samples[b] = &callSamples{}
	}
	for r := range rounds {
		for _, b := range backends {
			s := samples[b]
			if s.err != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			s.err = measureRound(ctx, trig, b, fn, n, s)
			fmt.Fprintf(os.Stderr, "trawl-bench: round %d %s: %v\n", r+1, b, s)
		}
	}

	fmt.Printf("### Per call\n\n")
	fmt.Printf("`%s` (one int argument, int return) called by BPF_PROG_TEST_RUN of a tracing program, %d calls per measurement after %d warm-up calls, timed in %d blocks of which the fastest counts (host load only slows blocks down), on CPU 0 with the garbage collector off; per round and backend: no program (baseline), empty programs of the attach types trawl's backend uses (fentry + fexit, kprobe.multi + kretprobe.multi, kprobe.session, fsession, fsession.multi, kprobe + kretprobe), for fentry and kprobe-multi the floor programs of internal/bpf/floor.c (the least a tracer must do to report a call: entry time kept in task storage, one ring-buffer record of times, task, argument and return value at exit; the floor ratio is (floor - baseline) / (empty - baseline)); trawl's session on the function (no filter, ring buffer not read during the run; every call checked to be captured); trawl's session counting calls in the kernel (Config.Aggregate, what --stats runs; every call checked to be counted; stats ratio: (stats - baseline) / (empty - baseline), target at most 1.3); trawl's session with `--show %s` (a frame filled and the show code run per call). Median of %d rounds; the ratio is (trawl - baseline) / (empty - baseline) per round, median and range. Under `make bench` the guest's clock counts emulated instructions (`vmrun -icount`): a ns is one instruction, and the numbers repeat from run to run. Target: at most 1.5.\n\n", callFunc, n, n/10, blocks, showExpr, rounds)
	fmt.Println("| backend | baseline ns/call | empty ns/call | floor ns/call | trawl ns/call | empty - baseline | floor - baseline | trawl - baseline | floor ratio | trawl / floor | ratio (median) | ratio (min-max) | stats - baseline | stats ratio | --show ns/call | --show - trawl |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, b := range backends {
		s := samples[b]
		switch {
		case s.err != nil && notSupported(s.err):
			fmt.Printf("| %s | not supported by this kernel | | | | | | | | | | | | | | |\n", b)
			continue
		case s.err != nil:
			fmt.Printf("| %s | error: %s | | | | | | | | | | | | | | |\n", b, oneLine(s.err))
			continue
		}
		var ratios []float64
		for i := range s.base {
			ratios = append(ratios, (s.trawl[i]-s.base[i])/(s.empty[i]-s.base[i]))
		}
		base, empty, tr := median(s.base), median(s.empty), median(s.trawl)
		floor := []string{"-", "-", "-", "-"} // ns/call, - baseline, floor ratio, trawl / floor
		if f := median(s.floor); len(s.floor) > 0 {
			floor = []string{fmt.Sprintf("%.0f", f), fmt.Sprintf("%.0f", f-base), fmt.Sprintf("%.2f", (f-base)/(empty-base)), fmt.Sprintf("%.2f", (tr-base)/(f-base))}
		}
		st, show := median(s.stats), median(s.show)
		fmt.Printf("| %s | %.0f | %.0f | %s | %.0f | %.0f | %s | %.0f | %s | %s | %.2f | %.2f-%.2f | %.0f | %.2f | %.0f | %.0f |\n", b, base, empty, floor[0], tr, empty-base, floor[1], tr-base,
			floor[2], floor[3], median(ratios), slices.Min(ratios), slices.Max(ratios), st-base, (st-base)/(empty-base), show, show-tr)
	}
	fmt.Println()
	printStats(backends, samples)
	printGateStack(backends, samples)
	printTrack(backends, samples)
	return nil
}

// printStats prints the table of --stats against the stats floor.
func printStats(backends []string, samples map[string]*callSamples) {
	fmt.Printf("### Per call: --stats against its floor\n\n")
	fmt.Printf("The same calls and rounds. Stats: trawl's session counting the calls in the kernel (as in the first table). Stats floor: the programs of internal/bpf/floor.c that do the least a tracer must do to count a call and its duration in the kernel (entry time in task storage, or in the session cookie for the session attach types; per-CPU counts of calls, total time and a log2 histogram; every call checked to be counted), attached as trawl's backend attaches. stats floor ratio = (stats floor - baseline) / (empty - baseline): no in-kernel aggregation of durations can cost less than that times the empty programs; stats / floor = (stats - baseline) / (stats floor - baseline). Medians of the rounds.\n\n")
	fmt.Println("| backend | empty - baseline | stats floor - baseline | stats - baseline | stats floor ratio | stats ratio | stats / floor |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, b := range backends {
		s := samples[b]
		if s.err != nil || len(s.statsFloor) == 0 {
			continue
		}
		base, empty, floor, st := median(s.base), median(s.empty), median(s.statsFloor), median(s.stats)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f |\n", b, empty-base, floor-base, st-base,
			(floor-base)/(empty-base), (st-base)/(empty-base), (st-base)/(floor-base))
	}
	fmt.Println()
}

// printGateStack prints the table of the per-call costs of the --entry
// gate and of --stack.
func printGateStack(backends []string, samples map[string]*callSamples) {
	fmt.Printf("### Per call: the --entry gate and --stack\n\n")
	fmt.Printf("The same calls and rounds. Gated: trawl's session on `%s` with `--entry %s`, which the calls are never inside, so each is left out by the gate in the kernel (every call checked to be counted outside); gate ratio = (gated - baseline) / (empty - baseline), target at most 1.2, the empty programs being of the attach types trawl attaches with --entry (for fsession an fentry and an fexit program). Stack: trawl's session with `--stack` (every call checked to be captured with its stack); stack / trawl = (stack - baseline) / (trawl - baseline). Medians of the rounds.\n\n", callFunc, gateEntry)
	fmt.Println("| backend | empty - baseline | gated - baseline | gate ratio (median) | gate ratio (min-max) | trawl - baseline | stack - baseline | stack / trawl |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, b := range backends {
		s := samples[b]
		if s.err != nil || len(s.gated) == 0 {
			continue
		}
		var ratios []float64
		for i := range s.base {
			ratios = append(ratios, (s.gated[i]-s.base[i])/(s.gatedEmpty[i]-s.base[i]))
		}
		base, empty, tr, gated, stack := median(s.base), median(s.gatedEmpty), median(s.trawl), median(s.gated), median(s.stack)
		fmt.Printf("| %s | %.0f | %.0f | %.2f | %.2f-%.2f | %.0f | %.0f | %.2f |\n", b, empty-base, gated-base, median(ratios),
			slices.Min(ratios), slices.Max(ratios), tr-base, stack-base, (stack-base)/(tr-base))
	}
	fmt.Println()
}

// printTrack prints the table of the per-call cost of --track for a
// call that receives no tracked object.
func printTrack(backends []string, samples map[string]*callSamples) {
	fmt.Printf("### Per call: an untracked call with --track\n\n")
	fmt.Printf("The same test runs and rounds. Untracked: trawl's session on `%s` (which each test run calls with a pointer to a struct on its stack) with `--track '%s'` and `--comm %s`, which no task has: each call is looked up among the tracked objects, found in none, and left out in the kernel (every call checked to be counted as filtered, none tracked). Filtered: the same session without --track, each call left out by --comm alone; untracked - filtered is what --track adds to a call of another task. untracked ratio = (untracked - baseline) / (empty - baseline), the empty programs being on `%s`; gated is the --entry gate's call left out, for comparison. Medians of the rounds.\n\n", trackFunc, trackType, untrackedComm, callFunc)
	fmt.Println("| backend | empty - baseline | gated - baseline | filtered - baseline | untracked - baseline | untracked - filtered | untracked ratio (median) | untracked ratio (min-max) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, b := range backends {
		s := samples[b]
		if s.err != nil || len(s.untracked) == 0 {
			continue
		}
		var ratios []float64
		for i := range s.base {
			ratios = append(ratios, (s.untracked[i]-s.base[i])/(s.empty[i]-s.base[i]))
		}
		base, empty, gated, untracked, filtered := median(s.base), median(s.empty), median(s.gated), median(s.untracked), median(s.filtered)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f-%.2f |\n", b, empty-base, gated-base, filtered-base, untracked-base, untracked-filtered,
			median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	fmt.Println()
}

// The --track measurement: trackFunc takes a pointer of trackType, to a
// struct on the stack of the test run, and the comm filter, which no task
// passes, keeps any call from starting a journey.
const (
	trackFunc     = "bpf_fentry_test8"
	trackType     = "struct bpf_fentry_test_t *"
	untrackedComm = "trawl-nobody"
)

// checkUntracked makes sure the comm filter (and --track) left out
// every call, none tracked.
func checkUntracked(s *trawl.Session, want uint64) error {
	st, err := s.Stats()
	if err != nil {
		return err
	}
	if st.Filtered != want || st.Tracked != 0 || st.Calls != 0 {
		return fmt.Errorf("--track left out %d of %d calls, tracked %d objects, sent %d calls", st.Filtered, want, st.Tracked, st.Calls)
	}
	return nil
}

// gateEntry is the entry function of the gated measurement: the calls
// measured are never inside one of its calls.
const gateEntry = "do_sys_openat2"

// measureTrawl opens a trawl session with cfg, on callFunc unless it
// names patterns, measures the time per call, and checks the session's
// counters with check.
func measureTrawl(ctx context.Context, trig *trigger, cfg trawl.Config, n int, check func(*trawl.Session) error) (float64, error) {
	if len(cfg.Patterns) == 0 {
		cfg.Patterns = []string{callFunc}
	}
	sess, err := trawl.Open(ctx, cfg)
	if err != nil {
		return 0, err
	}
	tr, err := trig.perCall(n)
	if err == nil {
		err = check(sess)
	}
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	return tr, err
}

// checkOutside makes sure the gate left out every call. (Calls of the
// entry function, by any task of the guest, are traced.)
func checkOutside(s *trawl.Session, want uint64) error {
	st, err := s.Stats()
	if err != nil {
		return err
	}
	if st.OutsideEntry != want {
		return fmt.Errorf("the gate left out %d of %d calls", st.OutsideEntry, want)
	}
	return nil
}

// maxCalls keeps a measurement's records within trawl's 16 MiB ring
// buffer (about 200 bytes a call), which is not read while measuring.
const maxCalls = 40000

// measureRound adds one baseline, one empty and one trawl measurement of
// backend b to s.
func measureRound(ctx context.Context, trig *trigger, b string, fn *kernel.Function, n int, s *callSamples) error {
	base, err := trig.perCall(n)
	if err != nil {
		return err
	}

	attach, ok := empties[b]
	if !ok {
		return fmt.Errorf("the bench has no empty program for backend %s", b)
	}
	closers, err := attach(fn)
	if err != nil {
		return err
	}
	empty, err := trig.perCall(n)
	if cerr := closeAll(closers); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}

	if closers, _, err = attachFloor(b, floorProgs[b], fn); err != nil {
		return err
	}
	if closers != nil {
		floor, err := trig.perCall(n)
		if cerr := closeAll(closers); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		s.floor = append(s.floor, floor)
	}

	captured := func(sess *trawl.Session) error { return checkCaptured(sess, calls(n)) }
	tr, err := measureTrawl(ctx, trig, trawl.Config{Backend: trawl.Backend(b)}, n, captured)
	if err != nil {
		return err
	}
	gated, err := measureTrawl(ctx, trig, trawl.Config{Backend: trawl.Backend(b), Entries: []string{gateEntry}}, n,
		func(sess *trawl.Session) error { return checkOutside(sess, calls(n)) })
	if err != nil {
		return fmt.Errorf("--entry: %w", err)
	}
	gatedEmpty := empty
	if attach, ok := gatedEmpties[b]; ok {
		if closers, err = attach(fn); err != nil {
			return err
		}
		gatedEmpty, err = trig.perCall(n)
		if cerr := closeAll(closers); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	stack, err := measureTrawl(ctx, trig, trawl.Config{Backend: trawl.Backend(b), Stack: true}, n, func(sess *trawl.Session) error {
		if st, err := sess.Stats(); err != nil || st.MissStack != 0 {
			return fmt.Errorf("%d calls without their stack (%v)", st.MissStack, err)
		}
		return captured(sess)
	})
	if err != nil {
		return fmt.Errorf("--stack: %w", err)
	}
	untracked, err := measureTrawl(ctx, trig, trawl.Config{Patterns: []string{trackFunc}, Backend: trawl.Backend(b), Track: trackType, Comm: untrackedComm}, n,
		func(sess *trawl.Session) error { return checkUntracked(sess, calls(n)) })
	if err != nil {
		return fmt.Errorf("--track: %w", err)
	}
	filtered, err := measureTrawl(ctx, trig, trawl.Config{Patterns: []string{trackFunc}, Backend: trawl.Backend(b), Comm: untrackedComm}, n,
		func(sess *trawl.Session) error { return checkUntracked(sess, calls(n)) })
	if err != nil {
		return fmt.Errorf("--comm: %w", err)
	}

	sess, err := trawl.Open(ctx, trawl.Config{Patterns: []string{callFunc}, Backend: trawl.Backend(b), Aggregate: true})
	if err != nil {
		return err
	}
	st, err := trig.perCall(n)
	if err == nil {
		err = checkCounted(sess, calls(n))
	}
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}

	closers, counts, err := attachFloor(b, statsFloorProgs[b], fn)
	if err != nil {
		return fmt.Errorf("stats floor: %w", err)
	}
	if closers != nil {
		statsFloor, err := trig.perCall(n)
		if err == nil {
			err = checkFloorCounted(counts, calls(n))
		}
		if cerr := closeAll(closers); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("stats floor: %w", err)
		}
		s.statsFloor = append(s.statsFloor, statsFloor)
	}

	sess, err = trawl.Open(ctx, trawl.Config{Patterns: []string{callFunc}, Backend: trawl.Backend(b), Show: []string{showExpr}})
	if err != nil {
		return err
	}
	show, err := trig.perCall(n)
	if err == nil {
		err = checkCaptured(sess, calls(n))
	}
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	s.base, s.empty, s.trawl, s.stats = append(s.base, base), append(s.empty, empty), append(s.trawl, tr), append(s.stats, st)
	s.show = append(s.show, show)
	s.gated, s.stack, s.untracked = append(s.gated, gated), append(s.stack, stack), append(s.untracked, untracked)
	s.gatedEmpty = append(s.gatedEmpty, gatedEmpty)
	s.filtered = append(s.filtered, filtered)
	return nil
}

// showExpr is the --show expression of the show column: callFunc's
// argument, which makes each call fill a frame and run the show code.
const showExpr = "a"

// checkCounted makes sure trawl's program counted every call in the
// kernel.
func checkCounted(s *trawl.Session, want uint64) error {
	fs, err := s.FunctionStats()
	if err != nil {
		return err
	}
	if len(fs) != 1 || fs[0].Calls != want || fs[0].Latency.Count() != want {
		return fmt.Errorf("trawl --stats counted %v, want %d calls of %s", fs, want, callFunc)
	}
	return nil
}

// checkCaptured makes sure trawl's program sent a record for every call:
// a measurement of a program that bailed out early would flatter it.
func checkCaptured(s *trawl.Session, want uint64) error {
	st, err := s.Stats()
	if err != nil {
		return err
	}
	if st.CookieLookups != 0 {
		return fmt.Errorf("trawl's kprobe program found the function by its attach cookie %d times, not by address", st.CookieLookups)
	}
	if st.Calls != want || st.Drops != 0 || st.MissStorage+st.MissDepth+st.MissEntry+st.MissExit != 0 {
		return fmt.Errorf("trawl captured %d of %d calls (drops %d, misses %d/%d/%d/%d)", st.Calls, want, st.Drops,
			st.MissStorage, st.MissDepth, st.MissEntry, st.MissExit)
	}
	return nil
}

// String summarises the last round.
func (s *callSamples) String() string {
	if s.err != nil {
		return "error: " + s.err.Error()
	}
	if len(s.base) == 0 {
		return "no samples"
	}
	i := len(s.base) - 1
	floor := ""
	if len(s.floor) > 0 {
		floor = fmt.Sprintf(", floor %.0f ns", s.floor[i])
	}
	return fmt.Sprintf("baseline %.0f ns, empty %.0f ns%s, trawl %.0f ns, trawl --stats %.0f ns, --show %.0f ns, gated %.0f ns, --stack %.0f ns, --track untracked %.0f ns",
		s.base[i], s.empty[i], floor, s.trawl[i], s.stats[i], s.show[i], s.gated[i], s.stack[i], s.untracked[i])
}

// median returns the median of xs, NaN when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
