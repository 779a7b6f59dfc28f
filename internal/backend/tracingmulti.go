// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// TracingMulti loads the capture program once as fsession.multi and
// attaches it to every target with one tracing_multi link (7.2, x86-64),
// by BTF id, cookie = plan index. The kernel attaches a link's functions
// all or none: a link that fails is halved until the failing functions
// are found and skipped. Functions in modules are skipped (the link takes
// vmlinux BTF ids).
var TracingMulti = register(&Backend{
	Name:        "tracing-multi",
	Needs:       features.TracingMulti,
	Family:      plan.Trampoline,
	VmlinuxOnly: true,
	Attach:      attachTracingMulti,
})

func attachTracingMulti(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	a := newAttachment(len(targets), progress)
	var ids []btf.TypeID
	var cookies []uint64
	var names []string
	for _, t := range targets {
		fn := t.Plan.Func
		if reason := notVmlinux(fn.Module); reason != "" {
			a.skipFunc(reason, fn.Name)
			continue
		}
		ids = append(ids, fn.BTFID)
		cookies = append(cookies, uint64(t.ID))
		names = append(names, fn.Name)
	}
	if len(ids) == 0 {
		return a, nil
	}
	insns, err := rawInstructions(c.Spec.Programs[bpf.CaptureProgFsessionCapture], c.Collection.Maps)
	if err != nil {
		return nil, fmt.Errorf("tracing_multi: %w", err)
	}
	prog, err := rawbpf.LoadTracing(&rawbpf.TracingSpec{
		Name:         bpf.CaptureProgFsessionCapture,
		AttachType:   rawbpf.AttachTraceFSessionMulti,
		Instructions: insns,
		License:      "GPL",
	})
	if err != nil {
		return nil, fmt.Errorf("tracing_multi: %w", err)
	}
	a.programs = []program{{name: bpf.CaptureProgFsessionCapture, prog: prog, owned: true}}
	owner := make([]int, len(ids)) // one item per function
	for i := range owner {
		owner[i] = i
	}
	b := newBatcher(a, "tracing_multi", owner, len(ids))
	b.attach = func(lo, hi int) ([]link.Link, error) {
		l, err := rawbpf.AttachTracingMulti(prog, rawbpf.AttachTraceFSessionMulti, ids[lo:hi], cookies[lo:hi])
		if err != nil {
			return nil, err
		}
		return []link.Link{l}, nil
	}
	b.name = func(i int) string { return names[i] }
	// On error, a holds what was attached: the caller says how far it got
	// and closes it.
	return a, b.run(ctx, 0, len(ids))
}
