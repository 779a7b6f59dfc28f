// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"

	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// Fsession loads one fsession program per target (7.0), a copy of the
// capture program sharing maps with the target's capture count spliced
// in, in parallel as Fentry does. One program runs at entry
// and exit of each call, so it costs one load and one trampoline link per
// function where fentry costs two. The programs go through rawbpf, so
// functions in modules are skipped.
var Fsession = register(&Backend{
	Name:        "fsession",
	Needs:       features.Fsession,
	Family:      plan.Trampoline,
	VmlinuxOnly: true,
	Attach:      attachFsession,
	cost:        &fsessionCost,
})

func attachFsession(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	insns, err := rawInstructions(c.Spec.Programs[bpf.CaptureProgFsessionCapture], c.Collection.Maps)
	if err != nil {
		return nil, fmt.Errorf("fsession: %w", err)
	}
	return attachEach(ctx, targets, fsessionCost, progress, func(a *Attachment, t Target) error {
		fn := t.Plan.Func
		if reason := notVmlinux(fn.Module); reason != "" {
			a.skipFunc(reason, fn.Name)
			return nil
		}
		one, err := spliceNrCaps(insns, t)
		if err != nil {
			return fmt.Errorf("fsession on %s: %w", fn.Name, err)
		}
		prog, err := rawbpf.LoadTracing(&rawbpf.TracingSpec{
			Name:         bpf.CaptureProgFsessionCapture,
			AttachType:   rawbpf.AttachTraceFSession,
			AttachBTFID:  fn.BTFID,
			Instructions: one,
			License:      "GPL",
		})
		if err == nil {
			var l link.Link
			l, err = rawbpf.AttachTracing(prog, rawbpf.AttachTraceFSession, uint64(t.ID))
			if err == nil {
				a.addFunc([]link.Link{l}, []program{{name: bpf.CaptureProgFsessionCapture, prog: prog, owned: true}})
				return nil
			}
			prog.Close()
		}
		if reason := classify(err); reason != "" {
			a.skipFunc(reason, fn.Name)
			return nil
		}
		return fmt.Errorf("fsession on %s: %w", fn.Name, err)
	})
}

// fsessionCost: a program and its link; 42 KB (amd64-7.3) and 40 KB
// (arm64-7.3) measured between 100 and 1000 functions.
var fsessionCost = perFunction{files: 2, memory: 48 << 10}

// notVmlinux says why a function of module cannot be attached through
// rawbpf, which takes vmlinux BTF ids only, or "" for vmlinux.
func notVmlinux(module string) string {
	if module == "" {
		return ""
	}
	return "in a module: fsession and tracing_multi attach vmlinux functions only"
}
