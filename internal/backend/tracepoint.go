// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// tracepointCost: a tp_btf program, its BTF and its link. Not measured:
// half of fentryCost, which is for two programs and their links.
var tracepointCost = perFunction{files: 3, memory: 34 << 10}

// AttachTracepoints attaches a tp_btf program to each tracepoint target,
// whichever backend attaches the functions: a copy of tp_btf_one per
// tracepoint sharing the capture's maps, knowing its plan index and slot
// count as fentry_one does (tp_btf programs have no attach cookie before
// 6.10), loaded and attached fentryParallel at a time. A tracepoint the
// kernel refuses for a reason classify knows is skipped.
func AttachTracepoints(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
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
