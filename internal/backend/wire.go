// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// Limits and flags of the BPF program, from internal/bpf/capture.h (bpf2go
// generates them), typed as the fields that hold them.
const (
	MaxSlots = int(bpf.CaptureLimitMAX_SLOTS)
	MaxCaps  = int(bpf.CaptureLimitMAX_CAPS)
	maxCap   = int(bpf.CaptureLimitMAX_CAP)
	srcStack = uint16(bpf.CaptureSrcFlagSRC_STACK)
	capMem   = uint8(bpf.CaptureCapKindCAP_MEM)
	capStr   = uint8(bpf.CaptureCapKindCAP_STR)
	capBuf   = uint8(bpf.CaptureCapKindCAP_BUF)
	capBufEx = uint8(bpf.CaptureCapKindCAP_BUF_EXIT)
	capBufRt = uint8(bpf.CaptureCapKindCAP_BUF_RET)

	planRegsInOrder = uint16(bpf.CapturePlanFlagPLAN_REGS_IN_ORDER)
	planExitCaps    = uint16(bpf.CapturePlanFlagPLAN_EXIT_CAPS)
)

// CapturedArgs returns the indexes of the arguments whose memory the BPF
// program copies, in the order of its captures: strings, pointers to
// structs or unions and sized buffers with a budget, at most MaxCaps;
// and last, the first buffer the function fills, copied at exit (the
// program copies one at most, so that its exits need no loop).
func CapturedArgs(p *plan.Plan) []int {
	var idx []int
	exit := -1
	for i, a := range p.Args {
		if a.Budget == 0 || a.Slot >= MaxSlots || len(idx) == MaxCaps {
			continue
		}
		switch {
		case a.Class == plan.Buffer && a.Buffer.AtExit:
			if exit < 0 {
				exit = i
			}
		case a.Class == plan.String || a.Class == plan.PtrStruct || a.Class == plan.Buffer:
			idx = append(idx, i)
		}
	}
	if exit >= 0 && len(idx) < MaxCaps {
		idx = append(idx, exit)
	}
	return idx
}

// Wire encodes a plan for the BPF program; arch picks the kprobe
// locations, which the program reads by argument register index or stack
// offset.
func Wire(p *plan.Plan, arch plan.Arch) (bpf.CapturePlan, error) {
	var w bpf.CapturePlan
	if p.NumSlots > MaxSlots {
		return w, fmt.Errorf("%s has %d argument slots, trawl reads %d", p.Func.Name, p.NumSlots, MaxSlots)
	}
	w.NrSlots = uint8(p.NumSlots)
	w.ErrKind, w.RetSize = errKind(p), uint8(p.Ret.Size)
	if p.Func.Proto() == nil {
		// No prototype: read the argument registers raw (kprobes only;
		// trampolines need BTF).
		w.NrSlots = uint8(min(arch.ArgRegs(), MaxSlots))
		for i := range w.NrSlots {
			w.Src[i] = uint16(i)
		}
	}
	for _, a := range p.Args {
		loc := a.Kprobe[arch]
		for s := 0; s < a.NumSlots && a.Slot+s < MaxSlots; s++ {
			if loc.Kind == plan.OnStack {
				w.Src[a.Slot+s] = srcStack | uint16(loc.Offset+8*s)
				continue
			}
			w.Src[a.Slot+s] = uint16(loc.Reg + s)
		}
	}
	if inOrder(w, arch) {
		w.Flags |= planRegsInOrder
	}
	for i, arg := range CapturedArgs(p) {
		a := p.Args[arg]
		c := &w.Caps[i]
		c.Slot, c.Kind, c.Size = uint8(a.Slot), capMem, uint16(min(a.Budget, maxCap-1))
		switch a.Class {
		case plan.String:
			c.Kind = capStr
		case plan.Buffer:
			n := p.Args[a.Buffer.LenArg]
			c.Kind, c.LenSlot, c.LenSize = bufferKind(a.Buffer), uint8(n.Slot), uint8(n.Size)
			if a.Buffer.AtExit {
				w.Flags |= planExitCaps
			}
		}
		w.NrCaps++
	}
	return w, nil
}

// inOrder says whether every slot of w is the argument register of its
// index, so that kprobes may copy the registers wholesale.
func inOrder(w bpf.CapturePlan, arch plan.Arch) bool {
	if int(w.NrSlots) > arch.ArgRegs() {
		return false
	}
	for i := range w.NrSlots {
		if w.Src[i] != uint16(i) {
			return false
		}
	}
	return true
}

// bufferKind returns the capture kind of a sized buffer: at entry, at
// exit, or at exit with the return value as its length.
func bufferKind(b *plan.SizedBuffer) uint8 {
	switch {
	case b.RetLen:
		return capBufRt
	case b.AtExit:
		return capBufEx
	}
	return capBuf
}
