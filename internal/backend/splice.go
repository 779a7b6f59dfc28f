// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/record"
)

// nrCapsFunc is the capture program's function that returns how many
// captures a plan has (trawl_nr_caps in internal/bpf/memory.h).
const nrCapsFunc = "trawl_nr_caps"

// CaptureFunc is the capture program's global function that copies one
// capture (trawl_capture in internal/bpf/memory.h).
const CaptureFunc = "trawl_capture"

// spliceNrCaps makes trawl_nr_caps return t's capture count in insns, a
// program loaded for t alone, so that the verifier walks the capture loop
// that many times rather than MaxCaps, and makes trawl_capture static, so
// that it checks each of those captures as part of the loop: a function
// has few, and a global trawl_capture costs each program some 5,000
// instructions of its own before 6.8, which checks it only if called.
// It returns insns unchanged if they do not call trawl_nr_caps.
func spliceNrCaps(insns asm.Instructions, t Target) (asm.Instructions, error) {
	n := len(record.Captures(t.Plan))
	insns, err := splice(insns, nrCapsFunc, asm.Instructions{asm.Mov.Imm(asm.R0, int32(n)), asm.Return()})
	if err != nil {
		return nil, err
	}
	return MakeStatic(insns, CaptureFunc), nil
}

// MakeStatic returns insns with the global functions named static: the
// verifier then checks them at each call, as part of their caller, rather
// than once on their own (which kernels before 5.12 only do for functions
// without pointer arguments). insns are not modified.
func MakeStatic(insns asm.Instructions, names ...string) asm.Instructions {
	out := slices.Clone(insns)
	for i := range out {
		fn := btf.FuncMetadata(&out[i])
		if fn == nil || fn.Linkage == btf.StaticFunc || !slices.Contains(names, fn.Name) {
			continue
		}
		static := *fn
		static.Linkage = btf.StaticFunc
		out[i] = btf.WithFuncMetadata(out[i], &static)
	}
	return out
}

// funcIDFunc and nrSlotsFunc are the capture program's functions that
// return the plan index and the slot count of the function a program
// copy serves (trawl_func and trawl_nr_slots in internal/bpf/one.h).
const (
	funcIDFunc  = "trawl_func"
	nrSlotsFunc = "trawl_nr_slots"
)

// spliceOne makes insns, a program loaded for t alone, know t's plan
// index, capture count and slot count as constants (trawl_func,
// trawl_nr_caps, trawl_nr_slots). Functions insns does not call are left
// out.
func spliceOne(insns asm.Instructions, t Target) (asm.Instructions, error) {
	insns, err := splice(insns, funcIDFunc, asm.Instructions{asm.Mov.Imm32(asm.R0, int32(t.ID)), asm.Return()})
	if err != nil {
		return nil, err
	}
	if insns, err = spliceNrCaps(insns, t); err != nil {
		return nil, err
	}
	return splice(insns, nrSlotsFunc, asm.Instructions{asm.Mov.Imm(asm.R0, int32(t.Plan.NumSlots)), asm.Return()})
}

// splice returns insns with the body of function fn replaced by body,
// which keeps fn's symbol and BTF. insns are not modified; if they do not
// hold fn, they are returned as they are.
func splice(insns asm.Instructions, fn string, body asm.Instructions) (asm.Instructions, error) {
	offsets, err := insns.SymbolOffsets()
	if err != nil {
		return nil, fmt.Errorf("splice %s: %w", fn, err)
	}
	start, ok := offsets[fn]
	if !ok {
		return insns, nil
	}
	end := start + 1
	for end < len(insns) && insns[end].Symbol() == "" {
		end++
	}
	body = slices.Clone(body)
	body[0] = body[0].WithMetadata(insns[start].Metadata)
	return slices.Concat(insns[:start], body, insns[end:]), nil
}
