// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
)

// tracepointCost: a tp_btf program, its BTF and its link. Not measured:
// half of fentryCost, which is for two programs and their links.
var tracepointCost = perFunction{files: 3, memory: 34 << 10}

// rawTracepointCost: the link of a tracepoint to the one raw_tp program,
// its only open file (what attachEach reads of a cost).
var rawTracepointCost = perFunction{files: 1}

// AttachTracepoints attaches the capture program to each tracepoint
// target, whichever backend attaches the functions. From 6.10
// (features.RawTracepointCookie), one raw_tp program, raw_tp_capture with
// the targets' filters, is loaded once and attached to every tracepoint
// with its plan index as the attach cookie. Before, each tracepoint gets
// a copy of tp_btf_one sharing the capture's maps, knowing its plan index
// and slot count as fentry_one does. Either way the links go in
// fentryParallel at a time. A tracepoint the kernel refuses for a reason
// classify knows is skipped.
func AttachTracepoints(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	if err := features.RawTracepointCookie(); err != nil {
		slog.Debug("tracepoints attach as tp_btf programs, one per tracepoint", "reason", err)
		return attachTracepointCopies(ctx, c, targets, progress)
	}
	return attachRawTracepoints(ctx, c, targets, progress)
}

// attachRawTracepoints loads raw_tp_capture once and attaches it to every
// target, by the tracepoint's name, with the target's plan index as the
// attach cookie.
func attachRawTracepoints(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	name := bpf.CaptureProgRawTpCapture
	ps := c.Spec.Programs[name].Copy()
	if err := SpliceFilter(ps, targets); err != nil {
		return nil, err
	}
	one := &ebpf.CollectionSpec{Maps: c.Spec.Maps, Programs: map[string]*ebpf.ProgramSpec{name: ps}, Types: c.Spec.Types}
	coll, err := ebpf.NewCollectionWithOptions(one, kernel.LoadOptions(c.Collection.Maps))
	if err != nil {
		return nil, fmt.Errorf("load the tracepoints' program: %w", err)
	}
	prog := coll.DetachProgram(name)
	coll.Close()
	a, err := attachEach(ctx, targets, rawTracepointCost, progress, func(a *Attachment, t Target) error {
		l, err := rawbpf.AttachRawTracepoint(prog, t.Plan.Func.Event, uint64(t.ID))
		if err != nil {
			if reason := classify(err); reason != "" {
				a.skipFunc(reason, t.Plan.Func.Name)
				return nil
			}
			return fmt.Errorf("attach to %s: %w", t.Plan.Func.Name, err)
		}
		a.addFunc([]link.Link{l}, nil)
		return nil
	})
	if a == nil {
		prog.Close()
		return nil, err
	}
	a.programs = append(a.programs, program{name: name, prog: prog, owned: true})
	return a, err
}

// attachTracepointCopies loads a copy of tp_btf_one for each target, with
// its plan index, slot count, capture count and filter spliced in, and
// attaches it to the target's tracepoint.
func attachTracepointCopies(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	ld := &fentryLoader{}
	names := []string{bpf.CaptureProgTpBtfOne}
	return attachEach(ctx, targets, tracepointCost, progress, func(a *Attachment, t Target) error {
		prepare := func(ps *ebpf.ProgramSpec) {
			ps.AttachTo = t.Plan.Func.Event
		}
		return attachOne(a, c.Spec, c.Collection.Maps, ld, t, names, prepare, func(_ int, prog *ebpf.Program) (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		})
	})
}
