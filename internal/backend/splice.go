// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf/asm"
)

// nrCapsFunc is the capture program's function that returns how many
// captures a plan has (trawl_nr_caps in internal/bpf/capture.c).
const nrCapsFunc = "trawl_nr_caps"

// spliceNrCaps makes trawl_nr_caps return t's capture count in insns, a
// program loaded for t alone, so that the verifier walks the capture loop
// that many times rather than MaxCaps. It returns insns unchanged if they
// do not call trawl_nr_caps.
func spliceNrCaps(insns asm.Instructions, t Target) (asm.Instructions, error) {
	n := len(Captures(t.Plan))
	return splice(insns, nrCapsFunc, asm.Instructions{asm.Mov.Imm(asm.R0, int32(n)), asm.Return()})
}

// funcIDFunc and nrSlotsFunc are the capture program's functions that
// return the plan index and the slot count of the function a program
// copy serves (trawl_func and trawl_nr_slots in internal/bpf/capture.c).
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
