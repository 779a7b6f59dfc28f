// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
	"github.com/trawl-dev/trawl/internal/selector"
)

// floorBackends are the backends that attach every function with one
// link (or one pair), whose open time the bench sets against creating the
// same links for empty programs: the kernel's floor.
var floorBackends = []string{string(trawl.BackendKprobeMulti), string(trawl.BackendKprobeSession), string(trawl.BackendTracingMulti)}

// emptyLinks loads empty programs of backend b's attach types and creates
// b's links for them: kretprobe.multi and kprobe.multi, or kprobe.session,
// on addrs; fsession.multi on ids, one program and link per module (""
// for vmlinux), as trawl does. No cookies: an empty program reads none.
// It returns the links and programs, to be closed in order.
func emptyLinks(b string, addrs []uintptr, ids map[string][]btf.TypeID) ([]io.Closer, error) {
	opts := link.KprobeMultiOptions{Addresses: addrs}
	switch b {
	case string(trawl.BackendKprobeMulti):
		ret := true
		return attachEmpty("", func(p *ebpf.Program, _ ebpf.AttachType) (link.Link, error) {
			if ret {
				ret = false
				return link.KretprobeMulti(p, opts)
			}
			return link.KprobeMulti(p, opts)
		}, ebpf.Kprobe, ebpf.AttachTraceKprobeMulti, ebpf.AttachTraceKprobeMulti)
	case string(trawl.BackendKprobeSession):
		opts.Session = true
		return attachEmpty("", func(p *ebpf.Program, _ ebpf.AttachType) (link.Link, error) {
			return link.KprobeMulti(p, opts)
		}, ebpf.Kprobe, ebpf.AttachTraceKprobeSession)
	case string(trawl.BackendTracingMulti):
		var closers []io.Closer
		for _, module := range slices.Sorted(maps.Keys(ids)) {
			var h *btf.Handle
			if module != "" {
				var err error
				if h, err = btf.FindHandle(func(info *btf.HandleInfo) bool { return info.IsModule() && info.Name == module }); err != nil {
					closeAll(closers)
					return nil, fmt.Errorf("BTF of module %s: %w", module, err)
				}
			}
			c, err := attachRaw(rawbpf.TracingSpec{AttachType: rawbpf.AttachTraceFSessionMulti, AttachBTF: h}, func(p *ebpf.Program) (link.Link, error) {
				return rawbpf.AttachTracingMulti(p, rawbpf.AttachTraceFSessionMulti, ids[module], nil)
			})
			if h != nil {
				h.Close() // the program holds its own reference
			}
			if err != nil {
				closeAll(closers)
				return nil, err
			}
			closers = append(c, closers...) // links and programs close before those of earlier modules
		}
		return closers, nil
	}
	return nil, fmt.Errorf("the bench has no empty links for backend %s", b)
}

// floorTargets returns the addresses (kprobe backends) or BTF ids
// (tracing-multi) that trawl attached backend b to: those of the selected
// functions, less the functions and addresses trawl skipped.
func floorTargets(b string, sel []*kernel.Function, skipped map[string][]string) (addrs []uintptr, ids map[string][]btf.TypeID, funcs int) {
	ids = map[string][]btf.TypeID{}
	left := map[string]bool{}
	for _, items := range skipped {
		for _, it := range items {
			left[it] = true
		}
	}
	for _, fn := range sel {
		if left[fn.Name] {
			continue
		}
		if b == string(trawl.BackendTracingMulti) {
			if fn.BTFID != 0 {
				ids[fn.Module] = append(ids[fn.Module], fn.BTFID)
				funcs++
			}
			continue
		}
		n := len(addrs)
		for _, a := range fn.Addrs {
			if !left[fmt.Sprintf("%#x", a)] {
				addrs = append(addrs, uintptr(a))
			}
		}
		if len(addrs) > n {
			funcs++
		}
	}
	return addrs, ids, funcs
}

// floorOnce creates backend b's links for empty programs on the functions
// trawl attached (sel less skipped) and closes them, timing both: r.attached
// counts the functions linked.
func floorOnce(b string, sel []*kernel.Function, skipped map[string][]string) (attachResult, error) {
	addrs, ids, funcs := floorTargets(b, sel, skipped)
	r := attachResult{attached: funcs, kernelMem: -1}
	memBefore, memErr := kernelMemory()
	start := time.Now()
	closers, err := emptyLinks(b, addrs, ids)
	if err != nil {
		return r, err
	}
	r.open = time.Since(start)
	if memAfter, err := kernelMemory(); err == nil && memErr == nil {
		r.kernelMem = memAfter - memBefore
	}
	fmt.Fprintf(os.Stderr, "trawl-bench: %s floor: %d functions in %s\n", b, funcs, round(r.open))
	start = time.Now()
	err = closeAll(closers)
	r.close = time.Since(start)
	fmt.Fprintf(os.Stderr, "trawl-bench: %s floor: closed in %s\n", b, round(r.close))
	return r, err
}

// floorRow is one row of the floor table: trawl on every function with a
// backend, and the empty links on the same functions.
type floorRow struct {
	backend string
	trawl   attachResult
	// command is the trawl command's run ("" open: not run).
	command attachResult
	floor   attachResult
	rounds  int
	err     error
}

// printFloor prints the table of trawl's open time against the floor's.
func printFloor(rows []floorRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("### Attach against the kernel's floor\n\n")
	fmt.Printf("For \"all\" above, on the backends that attach every function with one link: the same links (kretprobe.multi + kprobe.multi, kprobe.session, fsession.multi) created right after for empty programs (`return 0`, no cookies) on the addresses or BTF ids trawl attached (the selection less what trawl skipped), timed from loading the programs to the last link. trawl open is trawl.Open in this process, which holds the catalogue and the BTF types earlier runs decoded (an embedder's later sessions). trawl command is `trawl --backend B --debug --stats '*'` run as a fresh process, from its start until it says it is tracing: what a user waits for, the catalogue's load and the decoding of BTF included; its peak RSS is the command's peak resident memory (VmHWM) when it says so, and over its whole run (the kernel's maxrss at its exit). command stop: from an interrupt, once it traces, until it exits, with its steps (drain the ring buffer, write the output, close: detach and free); ratio (stop) is that over the floor's close plus the command's output step, target at most 1.3. With more than one round (`-floor-rounds`), trawl, the command and the floor take turns and the shortest time of each counts. Ratios: over the floor's open, target at most 1.2. Steps: where the time went (the steps `trawl --debug` logs).\n\n")
	t := measure.NewTable(os.Stdout, "backend", "rounds", "functions (trawl)", "functions (floor)", "trawl open", "trawl command", "floor open", "ratio (open)", "ratio (command)", "command peak RSS (tracing / run)", "trawl close", "floor close", "command stop", "ratio (stop)", "trawl kernel memory", "floor kernel memory", "trawl steps", "command steps", "command stop steps")
	for _, r := range rows {
		if r.err != nil {
			t.Row(r.backend, fmt.Sprint(r.rounds), fmt.Sprint(r.trawl.attached), "", round(r.trawl.open).String(), "", "error: "+oneLine(r.err))
			continue
		}
		command, commandRatio, commandRSS, stop, stopRatio := "not run (no trawl command)", "", "", "", ""
		if r.command.open > 0 {
			command, commandRatio = round(r.command.open).String(), measure.Times(r.command.open.Seconds()/r.floor.open.Seconds())
			commandRSS = megabytes(r.command.peakRSS) + " / " + megabytes(r.command.maxRSS)
			stop, stopRatio = round(r.command.close).String(), measure.Times(r.command.close.Seconds()/(r.floor.close+r.command.output).Seconds())
		}
		t.Row(r.backend, fmt.Sprint(r.rounds), fmt.Sprint(r.trawl.attached), fmt.Sprint(r.floor.attached),
			round(r.trawl.open).String(), command, round(r.floor.open).String(), measure.Times(r.trawl.open.Seconds()/r.floor.open.Seconds()), commandRatio, commandRSS,
			round(r.trawl.close).String(), round(r.floor.close).String(), stop, stopRatio, megabytes(r.trawl.kernelMem), megabytes(r.floor.kernelMem), r.trawl.steps, r.command.steps, r.command.stopSteps)
	}
	t.End()
}

// benchFloor measures the floor of backend b after the all-functions run
// r of the pattern "*", and the trawl command on "*" (a fresh process,
// which loads the catalogue and decodes BTF as a user's trace does; not
// when command is ""); then, for each further round, trawl, the command
// and the floor again, in turn: the shortest open time of each counts,
// since host load only ever slows a run down.
func benchFloor(ctx context.Context, cat *kernel.Catalogue, b string, r attachResult, rounds int, command string) floorRow {
	row := floorRow{backend: b, trawl: r, rounds: rounds}
	sel, err := selector.Select(cat, []string{"*"})
	if err != nil {
		row.err = err
		return row
	}
	took := func(r attachResult) time.Duration { return r.open }
	cases := []func(int) (attachResult, error){
		func(k int) (attachResult, error) {
			if k == 0 {
				return r, nil
			}
			again, err := attachOnce(ctx, cat, b, []string{"*"}, "")
			if err == nil {
				fmt.Fprintf(os.Stderr, "trawl-bench: %s N=all again: open %s (%s), close %s\n", b, round(again.open), again.steps, round(again.close))
			}
			return again, err
		},
		func(int) (attachResult, error) { return floorOnce(b, sel.Selected, r.skipped) },
	}
	if command != "" {
		cases = slices.Insert(cases, 1, func(int) (attachResult, error) {
			c, _, err := trawlCommandOnce(ctx, command, b, []string{"*"}, true, true)
			if err == nil {
				fmt.Fprintf(os.Stderr, "trawl-bench: %s trawl command on *: tracing after %s (%s)\n", b, round(c.open), c.steps)
			}
			return c, err
		})
	}
	runs, err := measure.Turns(ctx, rounds, cases)
	for _, run := range runs {
		err = cmp.Or(err, run.Err)
	}
	if err != nil {
		row.err = err
		return row
	}
	row.trawl, row.floor = measure.Fastest(runs[0].Results, took), measure.Fastest(runs[len(runs)-1].Results, took)
	if command != "" {
		row.command = measure.Fastest(runs[1].Results, took)
	}
	return row
}

// stepLog collects the open steps trawl.Open logs at debug level (what
// `trawl --debug` prints), and passes other records to the default
// handler it wraps.
type stepLog struct {
	slog.Handler
	mu    sync.Mutex
	steps []string
}

func (h *stepLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug
}

func (h *stepLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != "open step" {
		if !h.Handler.Enabled(ctx, r.Level) {
			return nil
		}
		return h.Handler.Handle(ctx, r)
	}
	var step, took string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "step":
			step = a.Value.String()
		case "took":
			took = round(a.Value.Duration()).String()
		}
		return true
	})
	h.mu.Lock()
	h.steps = append(h.steps, step+" "+took)
	h.mu.Unlock()
	return nil
}

// take returns the steps logged since the last call, comma-separated.
func (h *stepLog) take() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := strings.Join(h.steps, ", ")
	h.steps = nil
	return s
}

// steps collects trawl.Open's step times for the attach tables.
var steps = &stepLog{Handler: slog.NewTextHandler(os.Stderr, nil)}

func init() { slog.SetDefault(slog.New(steps)) }

// hasFloor reports whether the floor table has a row for backend b.
func hasFloor(b string) bool { return slices.Contains(floorBackends, b) }
