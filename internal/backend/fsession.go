// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"
	"sync"

	"github.com/cilium/ebpf/btf"

	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// NameFsession names Fsession.
const NameFsession Name = "fsession"

// Fsession loads one fsession program per target (7.0), a copy of the
// capture program sharing maps with the target's capture count spliced
// in, in parallel as Fentry does. One program runs at entry
// and exit of each call, so it costs one load and one trampoline link per
// function where fentry costs two. The programs go through rawbpf; one
// of a function in a module is loaded against the module's BTF.
//
// With --entry, Fentry attaches in its place (Choose says so): the kernel
// runs an fsession program's exit whatever its entry did, so a call the
// gate leaves out would run the whole program a second time, where the
// fexit program returns at once. tracing-multi cannot do the same
// (docs/benchmarks.md, "The --entry gate").
var Fsession = register(&Backend{
	Name:      NameFsession,
	Needs:     features.Fsession,
	Family:    plan.Trampoline,
	Attach:    attachFsession,
	cost:      &fsessionCost,
	withEntry: Fentry,
})

func attachFsession(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	insns, err := RawInstructions(c.Spec.Programs[bpf.CaptureProgFsessionCapture], c.Collection.Maps)
	if err != nil {
		return nil, fmt.Errorf("fsession: %w", err)
	}
	var mods moduleBTFs
	defer mods.close()
	return attachEach(ctx, targets, fsessionCost, progress, func(a *Attachment, t Target) error {
		fn := t.Plan.Func
		obj, err := mods.handle(fn.Module)
		if err != nil {
			a.skipFunc(err.Error(), fn.Name)
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
			AttachBTF:    obj,
			Instructions: one,
			License:      "GPL",
		})
		if err == nil {
			var l link.Link
			l, err = rawbpf.AttachTracing(prog, rawbpf.AttachTraceFSession, t.TrampolineCookie())
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

// fsessionCost: a program and its link, as measured between 100 and 1000
// functions in the 7.3 guests (docs/benchmarks.md, "Kernel memory").
var fsessionCost = perFunction{files: 2, memory: 48 << 10}

// moduleBTFs finds the BTF objects of modules, once each, for loads
// against a module's function; safe for concurrent use.
type moduleBTFs struct {
	mu      sync.Mutex
	handles map[string]*btf.Handle
}

// handle returns the BTF object of module, nil for vmlinux (""). Its
// error is worded as the reason a function of module is skipped.
func (m *moduleBTFs) handle(module string) (*btf.Handle, error) {
	if module == "" {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.handles[module]; ok {
		return h, nil
	}
	h, err := btf.FindHandle(func(info *btf.HandleInfo) bool { return info.IsModule() && info.Name == module })
	if err != nil {
		return nil, fmt.Errorf("no BTF object of module %s: %w", module, err)
	}
	if m.handles == nil {
		m.handles = map[string]*btf.Handle{}
	}
	m.handles[module] = h
	return h, nil
}

// close closes the BTF objects found: the programs loaded against them
// hold their own references.
func (m *moduleBTFs) close() {
	for _, h := range m.handles {
		h.Close()
	}
}
