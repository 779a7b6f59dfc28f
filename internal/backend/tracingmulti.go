// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// NameTracingMulti names TracingMulti.
const NameTracingMulti Name = "tracing-multi"

// TracingMulti loads the capture program as fsession.multi and attaches
// it to every target with one tracing_multi link (7.2, x86-64), by BTF
// id, cookie = plan index: once for vmlinux, and once per module whose
// functions are selected, loaded against the module's BTF, whose ids its
// link takes. The kernel attaches a link's functions all or none: a link
// that fails is halved until the failing functions are found and skipped.
var TracingMulti = register(&Backend{
	Name:   NameTracingMulti,
	Needs:  features.TracingMulti,
	Family: plan.Trampoline,
	Attach: attachTracingMulti,
})

func attachTracingMulti(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	a := newAttachment(len(targets), progress)
	// vmlinux first, then each module's functions together.
	targets = slices.Clone(targets)
	slices.SortStableFunc(targets, func(x, y Target) int { return strings.Compare(x.Plan.Func.Module, y.Plan.Func.Module) })
	insns, err := RawInstructions(c.Spec.Programs[bpf.CaptureProgFsessionCapture], c.Collection.Maps)
	if err != nil {
		return nil, fmt.Errorf("tracing_multi: %w", err)
	}
	var mods moduleBTFs
	defer mods.close()
	var ids []btf.TypeID
	var cookies []uint64
	var names []string
	var progs []*ebpf.Program // the program of each function, loaded for its module
	var groups [][2]int       // the functions [lo, hi) of each program
	for i := 0; i < len(targets); {
		module := targets[i].Plan.Func.Module
		end := i
		for end < len(targets) && targets[end].Plan.Func.Module == module {
			end++
		}
		group := targets[i:end]
		i = end
		obj, err := mods.handle(module)
		if err != nil {
			for _, t := range group {
				a.skipFunc(err.Error(), t.Plan.Func.Name)
			}
			continue
		}
		prog, err := rawbpf.LoadTracing(&rawbpf.TracingSpec{
			Name:         bpf.CaptureProgFsessionCapture,
			AttachType:   rawbpf.AttachTraceFSessionMulti,
			AttachBTF:    obj,
			Instructions: insns,
			License:      "GPL",
		})
		if err != nil {
			return a, fmt.Errorf("tracing_multi: %w", err)
		}
		a.programs = append(a.programs, program{name: bpf.CaptureProgFsessionCapture, prog: prog, owned: true})
		groups = append(groups, [2]int{len(ids), len(ids) + len(group)})
		for _, t := range group {
			ids = append(ids, t.Plan.Func.BTFID)
			cookies = append(cookies, t.TrampolineCookie())
			names = append(names, t.Plan.Func.Name)
			progs = append(progs, prog)
		}
	}
	owner := make([]int, len(ids)) // one item per function
	for i := range owner {
		owner[i] = i
	}
	b := newBatcher(a, "tracing_multi", owner, len(ids))
	b.attach = func(lo, hi int) ([]link.Link, error) {
		l, err := rawbpf.AttachTracingMulti(progs[lo], rawbpf.AttachTraceFSessionMulti, ids[lo:hi], cookies[lo:hi])
		if err != nil {
			return nil, err
		}
		return []link.Link{l}, nil
	}
	b.name = func(i int) string { return names[i] }
	for _, g := range groups {
		// On error, a holds what was attached: the caller says how far
		// it got and closes it.
		if err := b.run(ctx, g[0], g[1]); err != nil {
			return a, err
		}
	}
	return a, nil
}
