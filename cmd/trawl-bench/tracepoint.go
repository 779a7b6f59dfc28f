// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// tpParallel is how many tracepoints the floor attaches at once: as many
// as trawl attaches tracepoints with (fentryParallel in
// internal/backend).
const tpParallel = 32

// emptyTracepoints attaches an empty program to each event, tpParallel at
// a time, as trawl attaches tracepoints: one raw_tp program linked to
// every event with a cookie where the kernel takes one
// (features.RawTracepointCookie, 6.10), else a tp_btf program per event.
// It returns the links and programs, to be closed in order.
func emptyTracepoints(ctx context.Context, events []string) ([]io.Closer, error) {
	var mu sync.Mutex
	var closers []io.Closer
	var shared []io.Closer // the raw_tp program, closed after its links
	attach := emptyTracepoint
	if features.RawTracepointCookie() == nil {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL", Instructions: returnZero})
		if err != nil {
			return nil, fmt.Errorf("load an empty raw_tp program: %w", err)
		}
		shared = append(shared, prog)
		attach = func(event string) ([]io.Closer, error) {
			l, err := rawbpf.AttachRawTracepoint(prog, event, 1)
			if err != nil {
				return nil, fmt.Errorf("attach an empty raw_tp program to %s: %w", event, err)
			}
			return []io.Closer{l}, nil
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(tpParallel)
	for _, ev := range events {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			c, err := attach(ev)
			mu.Lock()
			closers = append(closers, c...)
			mu.Unlock()
			return err
		})
	}
	err := g.Wait()
	closers = append(closers, shared...)
	if err != nil {
		closeAll(closers)
		return nil, err
	}
	return closers, nil
}

// emptyTracepoint loads an empty tp_btf program for event and attaches
// it: the link, then the program. It finds the tracepoint in the kernel's
// BTF decoded once for all loads, as trawl does (kernel.LoadOptions):
// ebpf.NewProgram would decode vmlinux BTF anew for each.
func emptyTracepoint(event string) ([]io.Closer, error) {
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"empty": {
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: event,
		License: "GPL", Instructions: returnZero,
	}}}
	coll, err := ebpf.NewCollectionWithOptions(spec, kernel.LoadOptions(nil))
	if err != nil {
		return nil, fmt.Errorf("load an empty tp_btf program for %s: %w", event, err)
	}
	p := coll.DetachProgram("empty")
	coll.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("attach an empty tp_btf program to %s: %w", event, err)
	}
	return []io.Closer{l, p}, nil
}

// tracepointFloorOnce attaches empty programs to fns (catalogue
// tracepoints) and closes them, timing both.
func tracepointFloorOnce(ctx context.Context, fns []*kernel.Function) (attachResult, error) {
	events := make([]string, len(fns))
	for i, fn := range fns {
		events[i] = fn.Event
	}
	r := attachResult{selected: len(fns), attached: len(fns)}
	start := time.Now()
	closers, err := emptyTracepoints(ctx, events)
	if err != nil {
		return r, err
	}
	r.open = time.Since(start)
	start = time.Now()
	err = closeAll(closers)
	r.close = time.Since(start)
	return r, err
}

// benchTracepointAttach measures attaching n tracepoints picked evenly
// from the catalogue's, each named by a `tp:SUBSYSTEM:EVENT` pattern:
// trawl.Open in this process, the trawl command, empty programs on the
// tracepoints trawl attached, as trawl attaches them (the floor) and, when the guest has it,
// bpftrace's tracepoint probes on them when withBpftrace; rounds
// times each, in turns, the fastest counting.
func benchTracepointAttach(ctx context.Context, cat *kernel.Catalogue, n, rounds int, withBpftrace bool) error {
	all := cat.Tracepoints()
	fmt.Printf("### Tracepoints: attach\n\n")
	if len(all) == 0 {
		fmt.Printf("The kernel has no BTF-typed tracepoints.\n\n")
		return nil
	}
	var names []string
	for _, tp := range all {
		names = append(names, tp.Name)
	}
	set := pick(names, n)
	open, err := attachOnce(ctx, cat, string(trawl.BackendAuto), set, "")
	if err != nil {
		return fmt.Errorf("trawl on %d tracepoints: %w", len(set), err)
	}
	var skipped []string
	for reason, items := range open.skipped {
		skipped = append(skipped, items...)
		fmt.Fprintf(os.Stderr, "trawl-bench: tracepoints: trawl left out %s: %s\n", strings.Join(items, ", "), reason)
	}
	attached := slices.DeleteFunc(slices.Clone(set), func(name string) bool { return slices.Contains(skipped, name) })
	var fns []*kernel.Function
	for i := range all {
		if slices.Contains(attached, all[i].Name) {
			fns = append(fns, &all[i])
		}
	}

	command, commandErr := trawlCommand()
	bpftrace, bpftraceErr := guest.Bpftrace()
	if !withBpftrace {
		bpftraceErr = errors.New("-skip-bpftrace")
	}
	if bpftraceErr == nil {
		// The first run of a binary reads it from the host's share,
		// which is no part of its start.
		bpftraceErr = exec.CommandContext(ctx, bpftrace[0], append(slices.Clone(bpftrace[1:]), "--version")...).Run()
	}
	if commandErr == nil {
		commandErr = exec.CommandContext(ctx, command, "--version").Run()
	}
	probes := make([]string, len(fns))
	for i, fn := range fns {
		probes[i] = "tracepoint:" + fn.Subsystem + ":" + fn.Event
	}
	// The columns, in table order: trawl.Open, the floor, the command,
	// bpftrace; each measured unless why says why not.
	cols := []struct {
		name, why string
		run       func(k int) (attachResult, error)
	}{
		{"trawl.Open", "", func(k int) (attachResult, error) {
			if k == 0 {
				return open, nil
			}
			return attachOnce(ctx, cat, string(trawl.BackendAuto), set, "")
		}},
		{"floor", "", func(int) (attachResult, error) { return tracepointFloorOnce(ctx, fns) }},
		{"trawl command", errString(commandErr), func(int) (attachResult, error) {
			r, _, err := trawlCommandOnce(ctx, command, string(trawl.BackendAuto), attached, true, false)
			return r, err
		}},
		{"bpftrace", errString(bpftraceErr), func(int) (attachResult, error) { return bpftraceOnce(ctx, bpftrace, probes, len(probes)) }},
	}
	var cases []func(int) (attachResult, error)
	var slots []int
	results := make([]measured, len(cols))
	for i, col := range cols {
		if col.why != "" {
			results[i].why = "not run: " + col.why
			continue
		}
		slots = append(slots, i)
		cases = append(cases, func(k int) (attachResult, error) {
			r, err := col.run(k)
			fmt.Fprintf(os.Stderr, "trawl-bench: tracepoints round %d %s: open %s, close %s (%s) %v\n", k+1, col.name, round(r.open), round(r.close), r.steps, err)
			return r, err
		})
	}
	runs, err := measure.Turns(ctx, rounds, cases)
	if err != nil {
		return err
	}
	for j, slot := range slots {
		if runs[j].Err != nil {
			results[slot].why = "error: " + oneLine(runs[j].Err)
			continue
		}
		results[slot] = measured{r: measure.Fastest(runs[j].Results, func(r attachResult) time.Duration { return r.open })}
	}
	fmt.Printf("%d tracepoints picked evenly by name from the kernel's %d BTF-typed ones, each named by a `tp:SUBSYSTEM:EVENT` pattern: trawl.Open (backend auto) then Close in this process, which holds the catalogue; the trawl command (`trawl --debug` with the tracepoints trawl.Open attached, tracing the whole system), from its start until it says it is tracing and from an interrupt then until it exits; the floor: empty programs (`return 0`) attached to the same tracepoints as trawl attaches them, %d at a time: one raw_tp program linked to each with a cookie (6.10), or before a tp_btf program loaded for each; bpftrace with a `tracepoint:SUBSYSTEM:EVENT` probe on each, `{ @[probe] = count(); }` (one program per probe), `BEGIN { exit(); }`, from its start until it says every probe is attached. %d rounds in turns, the fastest of each counting. Ratios: over the floor's open; bpftrace's open over the command's.\n\n",
		len(set), len(all), tpParallel, rounds)
	t := measure.NewTable(os.Stdout, tracepointAttachColumns...)
	t.Row(tracepointAttachRow(len(set), results[0], results[1], results[2], results[3])...)
	t.End()
	return nil
}

// tracepointAttachColumns head the tracepoint attach table.
var tracepointAttachColumns = []string{"tracepoints", "attached", "trawl open", "trawl close", "command open", "command close", "floor open", "floor close", "open / floor", "command / floor", "bpftrace open", "bpftrace close", "bpftrace / command", "command steps"}

// tracepointAttachRow makes the row of n tracepoints from trawl.Open's,
// the floor's, the command's and bpftrace's measurements.
func tracepointAttachRow(n int, open, floor, command, bpftrace measured) []string {
	over := func(x, y measured) string {
		if x.why != "" || y.why != "" || y.r.open <= 0 {
			return ""
		}
		return measure.Times(x.r.open.Seconds() / y.r.open.Seconds())
	}
	attached := ""
	if open.why == "" {
		attached = fmt.Sprint(open.r.attached)
	}
	return slices.Concat([]string{fmt.Sprint(n), attached}, cells(open), cells(command), cells(floor),
		[]string{over(open, floor), over(command, floor)}, cells(bpftrace), []string{over(bpftrace, command), command.r.steps})
}

// errString is err's first line, "" without one.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return oneLine(err)
}

// The tracepoint of the per-call measurement: prctl(PR_SET_NAME) fires
// it once per call, in the calling task.
const (
	callTracepoint        = "task_rename"
	callTracepointPattern = "tp:task:task_rename"
)

// tpMaxCalls keeps a tracepoint measurement's records within trawl's 16
// MiB ring buffer: a task_rename record carries 256 bytes of the task
// and its new name.
const tpMaxCalls = 20000

// renamer renames the calling thread to its own name, which fires
// task_rename once per call.
type renamer struct{ name [16]byte }

func newRenamer() (*renamer, error) {
	var r renamer
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&r.name[0])), 0, 0, 0); err != nil {
		return nil, fmt.Errorf("read the thread's name: %w", err)
	}
	return &r, nil
}

// perCall renames the thread n/10 times to warm up, then n times in
// blocks, and returns the time per call in ns of the fastest block.
func (r *renamer) perCall(n int) (float64, error) {
	return timePerCall(n, func() error {
		if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&r.name[0])), 0, 0, 0); err != nil {
			return fmt.Errorf("rename the thread: %w", err)
		}
		return nil
	})
}

// tpRound is one round of the tracepoint's per-call measurements, ns per
// call: small is trawl copying smallBytes behind each pointer.
type tpRound struct{ base, empty, trawl, small float64 }

func (r tpRound) String() string {
	return fmt.Sprintf("baseline %.0f ns, empty %.0f ns, trawl %.0f ns, %d-byte captures %.0f ns", r.base, r.empty, r.trawl, smallBytes, r.small)
}

// smallBytes caps the struct and the string trawl copies in the small
// measurement, which leaves the tracepoint's own cost and trawl's per
// event work.
const smallBytes = 8

// benchTracepointCalls measures, in rounds, the time per prctl
// (PR_SET_NAME) call with nothing on task_rename, with an empty program
// on it (as trawl attaches one, see emptyTracepoints) and with trawl
// tracing it, and prints the table. The
// measuring thread is pinned to CPU 0.
func benchTracepointCalls(ctx context.Context, rounds int, target time.Duration) error {
	unpin, err := pinCPU0()
	if err != nil {
		return err
	}
	defer unpin()
	ren, err := newRenamer()
	if err != nil {
		return err
	}
	probe, err := ren.perCall(2000)
	if err != nil {
		return err
	}
	n := min(max(int(float64(target.Nanoseconds())/probe), 2000), tpMaxCalls)
	runs, err := measure.Turns(ctx, rounds, []func(int) (tpRound, error){func(k int) (tpRound, error) {
		r, err := tracepointRound(ctx, ren, n)
		fmt.Fprintf(os.Stderr, "trawl-bench: round %d %s: %s\n", k+1, callTracepointPattern, summary(r, err))
		return r, err
	}})
	if err != nil {
		return err
	}
	fmt.Printf("### Tracepoints: per call\n\n")
	fmt.Printf("`prctl(PR_SET_NAME)` with the thread's own name, which fires `%s` once a call, %d calls per measurement after %d warm-up calls, timed in %d blocks of which the fastest counts, on CPU 0 with the garbage collector off; per round: no program (baseline), an empty program (`return 0`) on the tracepoint as trawl attaches its own (raw_tp with a cookie from 6.10, else tp_btf), trawl's session on `%s` (no filter, ring buffer not read during the run; every call checked to be captured: the tracepoint's struct task_struct * and const char * arguments, 256 bytes of the task and the name); small: the same session copying %d bytes of each (`--struct-bytes %d --string-bytes %d`). Median of %d rounds; the ratio is (trawl - baseline) / (empty - baseline) per round, median and range.\n\n",
		callTracepoint, n, n/10, blocks, callTracepointPattern, smallBytes, smallBytes, smallBytes, rounds)
	row := tpRow{tracepoint: callTracepointPattern, err: runs[0].Err}
	for _, r := range runs[0].Results {
		row.base, row.empty, row.trawl, row.small = append(row.base, r.base), append(row.empty, r.empty), append(row.trawl, r.trawl), append(row.small, r.small)
	}
	printTracepointCalls(os.Stdout, []tpRow{row})
	return nil
}

// tracepointRound measures one round on the tracepoint.
func tracepointRound(ctx context.Context, ren *renamer, n int) (tpRound, error) {
	var r tpRound
	base, err := ren.perCall(n)
	if err != nil {
		return r, err
	}
	closers, err := emptyTracepoints(ctx, []string{callTracepoint})
	if err != nil {
		return r, err
	}
	empty, err := ren.perCall(n)
	if cerr := closeAll(closers); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}
	measureTrawl := func(capture trawl.CaptureOptions) (float64, error) {
		sess, err := trawl.Open(ctx, trawl.Config{Patterns: []string{callTracepointPattern}, Capture: capture})
		if err != nil {
			return 0, err
		}
		tr, err := ren.perCall(n)
		if err == nil {
			err = checkTracepointCaptured(sess, calls(n))
		}
		if cerr := sess.Close(); err == nil {
			err = cerr
		}
		return tr, err
	}
	tr, err := measureTrawl(trawl.CaptureOptions{})
	if err != nil {
		return r, err
	}
	small, err := measureTrawl(trawl.CaptureOptions{StructBytes: smallBytes, StringBytes: smallBytes})
	if err != nil {
		return r, fmt.Errorf("%d-byte captures: %w", smallBytes, err)
	}
	return tpRound{base, empty, tr, small}, nil
}

// checkTracepointCaptured makes sure trawl sent a record for each of the
// want events the bench fired: other tasks renamed meanwhile (a kernel
// thread started) may add theirs.
func checkTracepointCaptured(s *trawl.Session, want uint64) error {
	st, err := s.Stats()
	if err != nil {
		return err
	}
	if st.Calls < want || st.Drops != 0 || st.MissStorage+st.MissFrame != 0 {
		return fmt.Errorf("trawl captured %d of %d events (drops %d, misses %d/%d)", st.Calls, want, st.Drops, st.MissStorage, st.MissFrame)
	}
	return nil
}

// tpRow is a tracepoint's row of the per-call table: its series, or the
// error that stopped its measurements.
type tpRow struct {
	tracepoint                string
	base, empty, trawl, small measure.Samples
	err                       error
}

// printTracepointCalls writes the per-call table of tracepoints.
func printTracepointCalls(w io.Writer, rows []tpRow) {
	t := measure.NewTable(w, "tracepoint", "baseline ns/call", "empty ns/call", "trawl ns/call", "empty - baseline", "trawl - baseline", "ratio (median)", "ratio (min-max)", "small - baseline", "small ratio")
	for _, row := range rows {
		if failedRow(t, row.tracepoint, row.err) {
			continue
		}
		base, empty, tr, small := row.base.Median(), row.empty.Median(), row.trawl.Median(), row.small.Median()
		ratios := measure.Over(row.trawl, row.base, row.empty)
		t.Row(row.tracepoint, measure.Ns(base), measure.Ns(empty), measure.Ns(tr), measure.Ns(empty-base), measure.Ns(tr-base),
			measure.Times(ratios.Median()), measure.Range(ratios), measure.Ns(small-base), measure.Times(measure.Ratio(small, base, empty)))
	}
	t.End()
}
