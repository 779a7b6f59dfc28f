// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/plan"
)

// NameKprobe names Kprobe.
const NameKprobe Name = "kprobe"

// Kprobe attaches a classic kprobe and kretprobe (perf events) to each
// target, for kernels without kprobe.multi (before 5.18; arm64 before
// 6.14, where 5.10-5.19 have no trampolines either). Before 5.15 no attach
// cookie nor bpf_get_func_ip tells a program its function, so each
// function gets its own copy of the kprobe programs with its plan index
// as a constant (trawl_func in internal/bpf/one.h), loaded and
// attached in parallel as fentry does, and refused past half the
// available memory in the same way.
var Kprobe = register(&Backend{
	Name:   NameKprobe,
	Needs:  features.Kprobe,
	Family: plan.Kprobe,
	Attach: attachKprobe,
	cost:   &kprobeCost,
})

// kprobeCost: a kprobe and a kretprobe program, their BTF, and the two
// perf events holding them, as measured between 10 and 100 functions in
// the amd64-5.10 guest (docs/benchmarks.md, "Kernel memory").
var kprobeCost = perFunction{files: 5, memory: 176 << 10}

// kprobeKinds are the two programs attached to each function, exit
// first (see kinds in fentry.go).
var kprobeKinds = []struct {
	prog string
	ret  bool
}{
	{bpf.CaptureProgKretprobeOne, true},
	{bpf.CaptureProgKprobeOne, false},
}

func attachKprobe(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	ld := &fentryLoader{}
	return attachEach(ctx, targets, kprobeCost, progress, func(a *Attachment, t Target) error {
		return attachKprobeOne(a, c.Spec, c.Collection.Maps, ld, t)
	})
}

// attachKprobeOne loads the kretprobe and kprobe programs for t, with its
// plan index, capture count and filter spliced in, and attaches them by its name.
func attachKprobeOne(a *Attachment, spec *ebpf.CollectionSpec, maps map[string]*ebpf.Map, ld *fentryLoader, t Target) error {
	fn := t.Plan.Func
	if fn.Copies > 1 {
		// The kernel finds a kprobe's symbol with kallsyms_lookup_name,
		// and a kretprobe must be at a symbol's entry.
		a.skipFunc(fmt.Sprintf("several copies of the function (%d); a kprobe by name would reach only one", fn.Copies), fn.Name)
		return nil
	}
	names := []string{kprobeKinds[0].prog, kprobeKinds[1].prog}
	prepare := func(*ebpf.ProgramSpec) {}
	return attachOne(a, spec, maps, ld, t, names, prepare, func(i int, prog *ebpf.Program) (link.Link, error) {
		if kprobeKinds[i].ret {
			return link.Kretprobe(fn.Name, prog, nil)
		}
		return link.Kprobe(fn.Name, prog, nil)
	})
}
