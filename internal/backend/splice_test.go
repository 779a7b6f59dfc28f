// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"encoding/binary"
	"io"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/plan"
)

// TestSplice puts bodies into the stubs of the real capture programs.
func TestSplice(t *testing.T) {
	spec, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	two := &plan.Plan{Args: []plan.Arg{
		{Class: plan.String, Budget: 64, Slot: 0},
		{Class: plan.Signed, Slot: 1},
		{Class: plan.PtrStruct, Budget: 32, Slot: 2},
	}}
	filterBody := asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}
	for _, name := range []string{bpf.CaptureProgFentryCapture, bpf.CaptureProgFexitCapture, bpf.CaptureProgFsessionCapture, bpf.CaptureProgFollowFork} {
		ps := spec.Programs[name].Copy()
		offsets, _ := ps.Instructions.SymbolOffsets()
		if err := SpliceFilter(ps, []Target{{ID: 3, Plan: two, Filter: filterBody}}); err != nil {
			t.Fatal(err)
		}
		insns, err := spliceNrCaps(ps.Instructions, Target{ID: 3, Plan: two})
		if err != nil {
			t.Fatal(err)
		}
		after, _ := insns.SymbolOffsets()
		for _, stub := range []string{filter.Stub, nrCapsFunc} {
			if _, ok := offsets[stub]; !ok {
				if _, ok := after[stub]; ok {
					t.Errorf("%s does not call %s but got it", name, stub)
				}
				continue
			}
			start := after[stub]
			if fn := btf.FuncMetadata(&insns[start]); fn == nil || fn.Name != stub {
				t.Errorf("%s: the spliced %s lost its BTF: %v", name, stub, fn)
			}
		}
		if start, ok := after[CaptureFunc]; ok {
			if fn := btf.FuncMetadata(&insns[start]); fn == nil || fn.Linkage != btf.StaticFunc {
				t.Errorf("%s: %s is not static in a program for one function: %v", name, CaptureFunc, fn)
			}
			if fn := btf.FuncMetadata(&ps.Instructions[offsets[CaptureFunc]]); fn == nil || fn.Linkage != btf.GlobalFunc {
				t.Errorf("%s: the spec's %s changed: %v", name, CaptureFunc, fn)
			}
		} else if _, ok := after[nrCapsFunc]; ok {
			t.Errorf("%s calls %s but not %s", name, nrCapsFunc, CaptureFunc)
		}
		if start, ok := after[nrCapsFunc]; ok {
			if got := insns[start]; got.OpCode != asm.Mov.Op(asm.ImmSource) || got.Dst != asm.R0 || got.Constant != 2 || insns[start+1].OpCode != asm.Return().OpCode {
				t.Errorf("%s: %s is %v %v, want r0 = 2; exit", name, nrCapsFunc, got, insns[start+1])
			}
		}
		if err := insns.Marshal(io.Discard, binary.LittleEndian); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSpliceOne checks the programs loaded per function without cookies
// (classic kprobes, fentry before 5.17) get their function's plan index,
// capture count and slot count as constants.
func TestSpliceOne(t *testing.T) {
	spec, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{NumSlots: 3, Args: []plan.Arg{
		{Class: plan.String, Budget: 64, Slot: 0},
		{Class: plan.Signed, Slot: 1},
		{Class: plan.Signed, Slot: 2},
	}}
	want := map[string]map[string]int64{
		bpf.CaptureProgKprobeOne:    {funcIDFunc: 7, nrCapsFunc: 1},
		bpf.CaptureProgKretprobeOne: {funcIDFunc: 7},
		bpf.CaptureProgFentryOne:    {funcIDFunc: 7, nrCapsFunc: 1, nrSlotsFunc: 3},
		bpf.CaptureProgFexitOne:     {funcIDFunc: 7, nrSlotsFunc: 3},
	}
	for name, consts := range want {
		insns, err := spliceOne(spec.Programs[name].Copy().Instructions, Target{ID: 7, Plan: p})
		if err != nil {
			t.Fatal(err)
		}
		offsets, err := insns.SymbolOffsets()
		if err != nil {
			t.Fatal(err)
		}
		for fn, v := range consts {
			start, ok := offsets[fn]
			if !ok {
				t.Errorf("%s does not call %s", name, fn)
				continue
			}
			if got := insns[start]; got.Dst != asm.R0 || got.Constant != v || insns[start+1].OpCode != asm.Return().OpCode {
				t.Errorf("%s: %s is %v %v, want r0 = %d; exit", name, fn, got, insns[start+1], v)
			}
		}
	}
}
