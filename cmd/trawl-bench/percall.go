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
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/floor"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/internal/backend"
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
var empties = map[string]func(fn trawl.Function) ([]io.Closer, error){
	string(trawl.BackendFentry): func(fn trawl.Function) ([]io.Closer, error) {
		return attachEmpty(fn.Name, func(p *ebpf.Program, t ebpf.AttachType) (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: p, AttachType: t})
		}, ebpf.Tracing, ebpf.AttachTraceFExit, ebpf.AttachTraceFEntry)
	},
	string(trawl.BackendKprobeMulti): func(fn trawl.Function) ([]io.Closer, error) {
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
	string(trawl.BackendKprobe): func(fn trawl.Function) ([]io.Closer, error) {
		ret := true
		return attachEmpty(fn.Name, func(p *ebpf.Program, _ ebpf.AttachType) (link.Link, error) {
			if ret {
				ret = false
				return link.Kretprobe(fn.Name, p, nil)
			}
			return link.Kprobe(fn.Name, p, nil)
		}, ebpf.Kprobe, ebpf.AttachNone, ebpf.AttachNone)
	},
	string(trawl.BackendKprobeSession): func(fn trawl.Function) ([]io.Closer, error) {
		opts := kprobeOptions(fn)
		opts.Session = true
		return attachEmpty(fn.Name, func(p *ebpf.Program, _ ebpf.AttachType) (link.Link, error) {
			return link.KprobeMulti(p, opts)
		}, ebpf.Kprobe, ebpf.AttachTraceKprobeSession)
	},
	// An fsession program returning 0 runs at exit too, as trawl's does.
	string(trawl.BackendFsession): func(fn trawl.Function) ([]io.Closer, error) {
		return attachRaw(rawbpf.TracingSpec{AttachType: rawbpf.AttachTraceFSession, AttachBTFID: btf.TypeID(fn.BTFID)}, func(p *ebpf.Program) (link.Link, error) {
			return rawbpf.AttachTracing(p, rawbpf.AttachTraceFSession, 0)
		})
	},
	string(trawl.BackendTracingMulti): func(fn trawl.Function) ([]io.Closer, error) {
		return attachRaw(rawbpf.TracingSpec{AttachType: rawbpf.AttachTraceFSessionMulti}, func(p *ebpf.Program) (link.Link, error) {
			return rawbpf.AttachTracingMulti(p, rawbpf.AttachTraceFSessionMulti, []btf.TypeID{btf.TypeID(fn.BTFID)}, nil)
		})
	},
}

// gatedEmpties attach, for a backend whose programs differ with --entry,
// empty programs of the attach types it then uses: fsession attaches an
// fentry and an fexit program with --entry.
var gatedEmpties = map[string]func(fn trawl.Function) ([]io.Closer, error){
	string(trawl.BackendFsession): empties[string(trawl.BackendFentry)],
}

// floorProgs are, per backend, the programs of floor.c (package floor)
// that do the least a tracer of that kind must do to report a call: exit
// first, as trawl attaches.
var floorProgs = map[string][]string{
	string(trawl.BackendFentry):      {floor.FloorProgFloorFexit, floor.FloorProgFloorFentry},
	string(trawl.BackendKprobeMulti): {floor.FloorProgFloorKretprobe, floor.FloorProgFloorKprobe},
}

// statsFloorProgs are, per backend, the programs of floor.c (package floor)
// that do the least a tracer must do to count a call and its duration in
// the kernel (the stats floor), in the same order. tracing-multi attaches
// the fsession program with a tracing_multi link, as trawl does.
var statsFloorProgs = map[string][]string{
	string(trawl.BackendFentry):        {floor.FloorProgFloorStatsFexit, floor.FloorProgFloorFentry},
	string(trawl.BackendKprobeMulti):   {floor.FloorProgFloorStatsKretprobe, floor.FloorProgFloorKprobe},
	string(trawl.BackendKprobeSession): {floor.FloorProgFloorStatsKsession},
	string(trawl.BackendFsession):      {floor.FloorProgFloorStatsFsession},
	string(trawl.BackendTracingMulti):  {floor.FloorProgFloorStatsFsession},
}

// attachFloor loads and attaches the floor programs names of backend b to
// fn, and returns them with the stats floor's counts map, all to close.
// It returns nothing when names is empty.
func attachFloor(b string, names []string, fn trawl.Function) ([]io.Closer, *ebpf.Map, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	spec, err := floor.LoadFloor()
	if err != nil {
		return nil, nil, err
	}
	// cilium/ebpf cannot load fsession programs: its maps load here, the
	// program below, as trawl loads its own (internal/backend).
	fsession := spec.Programs[floor.FloorProgFloorStatsFsession]
	for name := range spec.Programs {
		if !slices.Contains(names, name) || name == floor.FloorProgFloorStatsFsession {
			delete(spec.Programs, name)
		}
	}
	if ps := spec.Programs[floor.FloorProgFloorStatsKsession]; ps != nil {
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
	counts, err := coll.Maps[floor.FloorMapFloorCounts].Clone()
	if err != nil {
		return nil, nil, err
	}
	if slices.Contains(names, floor.FloorProgFloorStatsFsession) {
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
		case floor.FloorProgFloorKprobe:
			l, err = link.KprobeMulti(p, kprobeOptions(fn))
		case floor.FloorProgFloorKretprobe, floor.FloorProgFloorStatsKretprobe:
			l, err = link.KretprobeMulti(p, kprobeOptions(fn))
		case floor.FloorProgFloorStatsKsession:
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

// checkFloorCounted makes sure the stats floor counted every call, each
// in its histogram.
func checkFloorCounted(counts *ebpf.Map, want uint64) error {
	var perCPU []floor.FloorFloorStats
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
func attachFsessionFloor(b string, ps *ebpf.ProgramSpec, maps map[string]*ebpf.Map, fn trawl.Function) ([]io.Closer, error) {
	insns, err := backend.RawInstructions(ps, maps)
	if err != nil {
		return nil, err
	}
	spec := rawbpf.TracingSpec{Name: "floor_stats", AttachType: rawbpf.AttachTraceFSession, AttachBTFID: btf.TypeID(fn.BTFID), Instructions: insns, License: "GPL"}
	if b == string(trawl.BackendTracingMulti) {
		spec.AttachType, spec.AttachBTFID = rawbpf.AttachTraceFSessionMulti, 0
	}
	p, err := rawbpf.LoadTracing(&spec)
	if err != nil {
		return nil, fmt.Errorf("load the floor program %s: %w", ps.Name, err)
	}
	var l link.Link
	if b == string(trawl.BackendTracingMulti) {
		l, err = rawbpf.AttachTracingMulti(p, rawbpf.AttachTraceFSessionMulti, []btf.TypeID{btf.TypeID(fn.BTFID)}, nil)
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
func kprobeOptions(fn trawl.Function) link.KprobeMultiOptions {
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

// callRound is one round of a backend's measurements, ns per call.
type callRound struct {
	base, empty, floor, trawl float64 // floor is NaN without floor programs
	stats                     float64 // trawl's session with Config.Aggregate (--stats)
	statsStack                float64 // the same with both stacks (--stats -f folded --stack)
	statsFloor                float64 // the stats floor programs, NaN without them
	show                      float64 // trawl's session with one --show expression
	// gated is trawl with the function outside every --entry call, stack
	// trawl with --stack=kernel, ustack trawl with --stack=user,
	// untracked trawl with --track on trackFunc, whose calls receive no
	// tracked object, filtered the same session without --track.
	gated, stack, ustack, untracked, filtered float64
	// gatedEmpty is the empty programs of the attach types of gated, for
	// a backend whose programs differ with --entry (gatedEmpties).
	gatedEmpty float64
}

// callSeries are a backend's rounds, one series a quantity.
type callSeries struct {
	base, empty, floor, trawl, stats, statsFloor, show    measure.Samples
	gated, stack, ustack, untracked, filtered, gatedEmpty measure.Samples
	statsStack                                            measure.Samples
}

// seriesOf returns the series of rounds rs.
func seriesOf(rs []callRound) callSeries {
	var s callSeries
	for _, r := range rs {
		s.base, s.empty, s.floor, s.trawl = append(s.base, r.base), append(s.empty, r.empty), append(s.floor, r.floor), append(s.trawl, r.trawl)
		s.stats, s.statsFloor, s.show = append(s.stats, r.stats), append(s.statsFloor, r.statsFloor), append(s.show, r.show)
		s.gated, s.stack, s.untracked = append(s.gated, r.gated), append(s.stack, r.stack), append(s.untracked, r.untracked)
		s.filtered, s.gatedEmpty, s.ustack = append(s.filtered, r.filtered), append(s.gatedEmpty, r.gatedEmpty), append(s.ustack, r.ustack)
		s.statsStack = append(s.statsStack, r.statsStack)
	}
	return s
}

// benchCalls measures, in rounds, the time per call of callFunc with
// nothing attached, with empty programs and with trawl, for each backend,
// and prints the table. The measuring goroutine is pinned to CPU 0.
func benchCalls(ctx context.Context, backends []string, rounds int, target time.Duration) error {
	fn, err := lookup(callFunc)
	if err != nil {
		return err
	}
	unpin, err := pinCPU0()
	if err != nil {
		return err
	}
	defer unpin()
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

	cases := make([]func(int) (callRound, error), len(backends))
	for i, b := range backends {
		cases[i] = func(k int) (callRound, error) {
			r, err := measureRound(ctx, trig, b, fn, n)
			fmt.Fprintf(os.Stderr, "trawl-bench: round %d %s: %s\n", k+1, b, summary(r, err))
			return r, err
		}
	}
	runs, err := measure.Turns(ctx, rounds, cases)
	if err != nil {
		return err
	}
	rows := make([]callRow, len(backends))
	for i, b := range backends {
		rows[i] = callRow{b, seriesOf(runs[i].Results), runs[i].Err}
	}

	fmt.Printf("### Per call\n\n")
	fmt.Printf("`%s` (one int argument, int return) called by BPF_PROG_TEST_RUN of a tracing program, %d calls per measurement after %d warm-up calls, timed in %d blocks of which the fastest counts (host load only slows blocks down), on CPU 0 with the garbage collector off; per round and backend: no program (baseline), empty programs of the attach types trawl's backend uses (fentry + fexit, kprobe.multi + kretprobe.multi, kprobe.session, fsession, fsession.multi, kprobe + kretprobe), for fentry and kprobe-multi the floor programs of cmd/trawl-bench/floor/floor.c (the least a tracer must do to report a call: entry time kept in task storage, one ring-buffer record of times, task, argument and return value at exit; the floor ratio is (floor - baseline) / (empty - baseline)); trawl's session on the function (no filter, ring buffer not read during the run; every call checked to be captured); trawl's session counting calls in the kernel (Config.Aggregate, what --stats runs; every call checked to be counted; stats ratio: (stats - baseline) / (empty - baseline), target at most 1.3); trawl's session with `--show %s` (a frame filled and the show code run per call). Median of %d rounds; the ratio is (trawl - baseline) / (empty - baseline) per round, median and range. Under `make bench` the guest's clock counts emulated instructions (`vmrun -icount`): a ns is one instruction, and the numbers repeat from run to run. Target: at most 1.5.\n\n", callFunc, n, n/10, blocks, showExpr, rounds)
	printCalls(os.Stdout, rows)
	printStats(os.Stdout, rows)
	printGateStack(os.Stdout, rows)
	printTrack(os.Stdout, rows)
	return nil
}

// printCalls writes the rows of the per-call table.
func printCalls(w io.Writer, rows []callRow) {
	t := measure.NewTable(w, "backend", "baseline ns/call", "empty ns/call", "floor ns/call", "trawl ns/call", "empty - baseline", "floor - baseline", "trawl - baseline", "floor ratio", "trawl / floor", "ratio (median)", "ratio (min-max)", "stats - baseline", "stats ratio", "--show ns/call", "--show - trawl")
	for _, row := range rows {
		if failedRow(t, row.backend, row.err) {
			continue
		}
		s := row.s
		base, empty, tr := s.base.Median(), s.empty.Median(), s.trawl.Median()
		ratios := measure.Over(s.trawl, s.base, s.empty)
		fl := []string{"-", "-", "-", "-"} // ns/call, - baseline, floor ratio, trawl / floor
		if f := s.floor.Median(); !math.IsNaN(f) {
			fl = []string{measure.Ns(f), measure.Ns(f - base), measure.Times(measure.Ratio(f, base, empty)), measure.Times(measure.Ratio(tr, base, f))}
		}
		st, show := s.stats.Median(), s.show.Median()
		t.Row(row.backend, measure.Ns(base), measure.Ns(empty), fl[0], measure.Ns(tr), measure.Ns(empty-base), fl[1], measure.Ns(tr-base),
			fl[2], fl[3], measure.Times(ratios.Median()), measure.Range(ratios), measure.Ns(st-base), measure.Times(measure.Ratio(st, base, empty)), measure.Ns(show), measure.Ns(show-tr))
	}
	t.End()
}

// callRow is a backend's row of the per-call tables: its series, or the
// error that stopped its measurements.
type callRow struct {
	backend string
	s       callSeries
	err     error
}

// printStats prints the table of --stats against the stats floor.
func printStats(w io.Writer, rows []callRow) {
	fmt.Fprintf(w, "### Per call: --stats against its floor\n\n")
	fmt.Fprintf(w, "The same calls and rounds. Stats: trawl's session counting the calls in the kernel (as in the first table). Stats floor: the programs of cmd/trawl-bench/floor/floor.c that do the least a tracer must do to count a call and its duration in the kernel (entry time in task storage, or in the session cookie for the session attach types; per-CPU counts of calls, total time and a log2 histogram; every call checked to be counted), attached as trawl's backend attaches. stats floor ratio = (stats floor - baseline) / (empty - baseline): no in-kernel aggregation of durations can cost less than that times the empty programs; stats / floor = (stats - baseline) / (stats floor - baseline). Medians of the rounds.\n\n")
	t := measure.NewTable(w, "backend", "empty - baseline", "stats floor - baseline", "stats - baseline", "stats floor ratio", "stats ratio", "stats / floor")
	for _, row := range rows {
		s := row.s
		if row.err != nil || len(s.base) == 0 || math.IsNaN(s.statsFloor.Median()) {
			continue
		}
		base, empty, floor, st := s.base.Median(), s.empty.Median(), s.statsFloor.Median(), s.stats.Median()
		t.Row(row.backend, measure.Ns(empty-base), measure.Ns(floor-base), measure.Ns(st-base),
			measure.Times(measure.Ratio(floor, base, empty)), measure.Times(measure.Ratio(st, base, empty)), measure.Times(measure.Ratio(st, base, floor)))
	}
	t.End()
}

// printGateStack prints the table of the per-call costs of the --entry
// gate and of --stack.
func printGateStack(w io.Writer, rows []callRow) {
	fmt.Fprintf(w, "### Per call: the --entry gate and --stack\n\n")
	fmt.Fprintf(w, "The same calls and rounds. Gated: trawl's session on `%s` with `--entry %s`, which the calls are never inside, so each is left out by the gate in the kernel (every call checked to be counted outside); gate ratio = (gated - baseline) / (empty - baseline), target at most 1.2, the empty programs being of the attach types trawl attaches with --entry (for fsession an fentry and an fexit program). Stack: trawl's session with `--stack=kernel` (every call checked to be captured with its stack); stack / trawl = (stack - baseline) / (trawl - baseline). User stack: the same with `--stack=user` (the bench's own Go frames, none missed). Stats stack: trawl's session counting the calls by both stacks in the kernel, as `--stats -f folded --stack` does (every call checked to be counted under its stacks); stats stack / stats = (stats stack - baseline) / (stats - baseline). Medians of the rounds.\n\n", callFunc, gateEntry)
	t := measure.NewTable(w, "backend", "empty - baseline", "gated - baseline", "gate ratio (median)", "gate ratio (min-max)", "trawl - baseline", "stack - baseline", "stack / trawl", "user stack - baseline", "user stack / trawl", "stats stack - baseline", "stats stack / stats")
	for _, row := range rows {
		s := row.s
		if row.err != nil || len(s.gated) == 0 {
			continue
		}
		ratios := measure.Over(s.gated, s.base, s.gatedEmpty)
		base, empty, tr, gated, stack, ustack := s.base.Median(), s.gatedEmpty.Median(), s.trawl.Median(), s.gated.Median(), s.stack.Median(), s.ustack.Median()
		st, statsStack := s.stats.Median(), s.statsStack.Median()
		t.Row(row.backend, measure.Ns(empty-base), measure.Ns(gated-base), measure.Times(ratios.Median()), measure.Range(ratios),
			measure.Ns(tr-base), measure.Ns(stack-base), measure.Times(measure.Ratio(stack, base, tr)),
			measure.Ns(ustack-base), measure.Times(measure.Ratio(ustack, base, tr)),
			measure.Ns(statsStack-base), measure.Times(measure.Ratio(statsStack, base, st)))
	}
	t.End()
}

// printTrack prints the table of the per-call cost of --track for a
// call that receives no tracked object.
func printTrack(w io.Writer, rows []callRow) {
	fmt.Fprintf(w, "### Per call: an untracked call with --track\n\n")
	fmt.Fprintf(w, "The same test runs and rounds. Untracked: trawl's session on `%s` (which each test run calls with a pointer to a struct on its stack) with `--track '%s'` and `--comm %s`, which no task has: each call is looked up among the tracked objects, found in none, and left out in the kernel (every call checked to be counted as filtered, none tracked). Filtered: the same session without --track, each call left out by --comm alone; untracked - filtered is what --track adds to a call of another task. untracked ratio = (untracked - baseline) / (empty - baseline), the empty programs being on `%s`; gated is the --entry gate's call left out, for comparison. Medians of the rounds.\n\n", trackFunc, trackType, untrackedComm, callFunc)
	t := measure.NewTable(w, "backend", "empty - baseline", "gated - baseline", "filtered - baseline", "untracked - baseline", "untracked - filtered", "untracked ratio (median)", "untracked ratio (min-max)")
	for _, row := range rows {
		s := row.s
		if row.err != nil || len(s.untracked) == 0 {
			continue
		}
		ratios := measure.Over(s.untracked, s.base, s.empty)
		base, empty, gated, untracked, filtered := s.base.Median(), s.empty.Median(), s.gated.Median(), s.untracked.Median(), s.filtered.Median()
		t.Row(row.backend, measure.Ns(empty-base), measure.Ns(gated-base), measure.Ns(filtered-base), measure.Ns(untracked-base), measure.Ns(untracked-filtered),
			measure.Times(ratios.Median()), measure.Range(ratios))
	}
	t.End()
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

// measureRound measures one round of backend b.
func measureRound(ctx context.Context, trig *trigger, b string, fn trawl.Function, n int) (callRound, error) {
	r := callRound{floor: math.NaN(), statsFloor: math.NaN()}
	base, err := trig.perCall(n)
	if err != nil {
		return r, err
	}

	attach, ok := empties[b]
	if !ok {
		return r, fmt.Errorf("the bench has no empty program for backend %s", b)
	}
	closers, err := attach(fn)
	if err != nil {
		return r, err
	}
	empty, err := trig.perCall(n)
	if cerr := closeAll(closers); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}

	if closers, _, err = attachFloor(b, floorProgs[b], fn); err != nil {
		return r, err
	}
	if closers != nil {
		floor, err := trig.perCall(n)
		if cerr := closeAll(closers); err == nil {
			err = cerr
		}
		if err != nil {
			return r, err
		}
		r.floor = floor
	}

	captured := func(sess *trawl.Session) error { return checkCaptured(sess, calls(n)) }
	tr, err := measureTrawl(ctx, trig, trawl.Config{Backend: trawl.Backend(b)}, n, captured)
	if err != nil {
		return r, err
	}
	gated, err := measureTrawl(ctx, trig, trawl.Config{Backend: trawl.Backend(b), Entries: []string{gateEntry}}, n,
		func(sess *trawl.Session) error { return checkOutside(sess, calls(n)) })
	if err != nil {
		return r, fmt.Errorf("--entry: %w", err)
	}
	gatedEmpty := empty
	if attach, ok := gatedEmpties[b]; ok {
		if closers, err = attach(fn); err != nil {
			return r, err
		}
		gatedEmpty, err = trig.perCall(n)
		if cerr := closeAll(closers); err == nil {
			err = cerr
		}
		if err != nil {
			return r, err
		}
	}
	stack, err := measureTrawl(ctx, trig, trawl.Config{Backend: trawl.Backend(b), Stack: true}, n, func(sess *trawl.Session) error {
		if st, err := sess.Stats(); err != nil || st.MissStack != 0 {
			return fmt.Errorf("%d calls without their stack (%v)", st.MissStack, err)
		}
		return captured(sess)
	})
	if err != nil {
		return r, fmt.Errorf("--stack: %w", err)
	}
	ustack, err := measureTrawl(ctx, trig, trawl.Config{Backend: trawl.Backend(b), UserStack: true}, n, func(sess *trawl.Session) error {
		if st, err := sess.Stats(); err != nil || st.MissUserStack != 0 {
			return fmt.Errorf("%d calls without their user stack (%v)", st.MissUserStack, err)
		}
		return captured(sess)
	})
	if err != nil {
		return r, fmt.Errorf("--stack=user: %w", err)
	}
	untracked, err := measureTrawl(ctx, trig, trawl.Config{Patterns: []string{trackFunc}, Backend: trawl.Backend(b), Track: trackType, Comm: untrackedComm}, n,
		func(sess *trawl.Session) error { return checkUntracked(sess, calls(n)) })
	if err != nil {
		return r, fmt.Errorf("--track: %w", err)
	}
	filtered, err := measureTrawl(ctx, trig, trawl.Config{Patterns: []string{trackFunc}, Backend: trawl.Backend(b), Comm: untrackedComm}, n,
		func(sess *trawl.Session) error { return checkUntracked(sess, calls(n)) })
	if err != nil {
		return r, fmt.Errorf("--comm: %w", err)
	}

	sess, err := trawl.Open(ctx, trawl.Config{Patterns: []string{callFunc}, Backend: trawl.Backend(b), Aggregate: true})
	if err != nil {
		return r, err
	}
	st, err := trig.perCall(n)
	if err == nil {
		err = checkCounted(sess, calls(n))
	}
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}

	sess, err = trawl.Open(ctx, trawl.Config{Patterns: []string{callFunc}, Backend: trawl.Backend(b), Aggregate: true, Stack: true, UserStack: true})
	if err != nil {
		return r, err
	}
	statsStack, err := trig.perCall(n)
	if err == nil {
		err = checkStackCounted(sess, calls(n))
	}
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, fmt.Errorf("--stats --stack: %w", err)
	}

	closers, counts, err := attachFloor(b, statsFloorProgs[b], fn)
	if err != nil {
		return r, fmt.Errorf("stats floor: %w", err)
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
			return r, fmt.Errorf("stats floor: %w", err)
		}
		r.statsFloor = statsFloor
	}

	sess, err = trawl.Open(ctx, trawl.Config{Patterns: []string{callFunc}, Backend: trawl.Backend(b), Show: []string{showExpr}})
	if err != nil {
		return r, err
	}
	show, err := trig.perCall(n)
	if err == nil {
		err = checkCaptured(sess, calls(n))
	}
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}
	r.base, r.empty, r.trawl, r.stats, r.show, r.statsStack = base, empty, tr, st, show, statsStack
	r.gated, r.stack, r.ustack, r.untracked, r.filtered, r.gatedEmpty = gated, stack, ustack, untracked, filtered, gatedEmpty
	return r, nil
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

// checkStackCounted makes sure trawl's program counted every call in the
// kernel under its stacks, none lost.
func checkStackCounted(s *trawl.Session, want uint64) error {
	counts, err := s.StackCounts()
	if err != nil {
		return err
	}
	var sum uint64
	for _, c := range counts {
		if slices.Contains(c.Stack, call.LostStack) || slices.Contains(c.Stack, call.UncountedStack) || slices.Contains(c.UStack, call.LostStack) || len(c.UStack) == 0 {
			return fmt.Errorf("trawl --stats --stack counted %d calls of %s without their stacks: %q, %q", c.Calls, c.Func, c.Stack, c.UStack)
		}
		sum += c.Calls
	}
	if sum != want {
		return fmt.Errorf("trawl --stats --stack counted %d calls of %s by stack, want %d", sum, callFunc, want)
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

// String summarises the round.
func (r callRound) String() string {
	floor := ""
	if !math.IsNaN(r.floor) {
		floor = fmt.Sprintf(", floor %.0f ns", r.floor)
	}
	return fmt.Sprintf("baseline %.0f ns, empty %.0f ns%s, trawl %.0f ns, trawl --stats %.0f ns, --show %.0f ns, gated %.0f ns, --stack %.0f ns, --stack=user %.0f ns, --track untracked %.0f ns",
		r.base, r.empty, floor, r.trawl, r.stats, r.show, r.gated, r.stack, r.ustack, r.untracked)
}

// pinCPU0 locks the calling goroutine to its thread and pins the thread to
// CPU 0, where the calls are measured; unpin unlocks it.
func pinCPU0() (unpin func(), err error) {
	runtime.LockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("pin to CPU 0: %w", err)
	}
	return runtime.UnlockOSThread, nil
}
