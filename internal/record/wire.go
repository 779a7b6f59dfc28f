// SPDX-License-Identifier: Apache-2.0

// Package record holds the layout trawl shares with the capture program:
// how a plan is encoded for it (Wire), its limits, and the order in which
// it captures memory (Captures), by which the event parser reads a
// record's data back.
package record

import (
	"fmt"
	"slices"

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
	planDeep        = uint16(bpf.CapturePlanFlagPLAN_DEEP)
	planTrackRet    = uint16(bpf.CapturePlanFlagPLAN_TRACK_RET)
	planTrackFree   = uint16(bpf.CapturePlanFlagPLAN_TRACK_FREE)
	planTrackDrop   = uint16(bpf.CapturePlanFlagPLAN_TRACK_DROP)
	capDeep         = uint8(bpf.CaptureCapKindCAP_DEEP)
	capPkt          = uint8(bpf.CaptureCapKindCAP_PKT)
	capDeepStr      = uint8(bpf.CaptureCapKindCAP_DEEP_STR)
	capPath         = uint8(bpf.CaptureCapKindCAP_PATH)
)

// MemCapture is one memory capture of a plan: the memory behind an
// argument, or a struct a pointer in captured memory leads to.
type MemCapture struct {
	// Arg is the argument, or the argument the pointers start from.
	Arg int
	// Deep is the index in Plan.Deep, -1 for the argument's own memory
	// or packet.
	Deep int
	// Packet is set for the packet headers of an sk_buff argument
	// (Plan.Packets).
	Packet bool
	// Member is the index in Plan.Members plus one, 0 for the other
	// captures.
	Member int
	// Window is the index in Plan.Windows plus one, 0 for the other
	// captures.
	Window int
}

// Captures returns the memory captures of a plan in the order the BPF
// program makes them: strings, pointers to structs or unions and sized
// buffers with a budget, at most MaxCaps; and last, the first buffer the
// function fills, copied at exit (the program copies one at most, so that
// its exits need no loop). A plan with Deep, Packets or Members captures
// has the structs first, arguments', then the packets, then the Deep ones
// not cut, then the Windows, then the Members, then the rest (PLAN_DEEP).
func Captures(p *plan.Plan) []MemCapture {
	var structs, rest []MemCapture
	exit := -1
	for i, a := range p.Args {
		if a.Budget == 0 || a.Slot >= MaxSlots || len(structs)+len(rest) == MaxCaps {
			continue
		}
		switch {
		case a.Class == plan.Buffer && a.Buffer.AtExit:
			if exit < 0 {
				exit = i
			}
		case a.Class == plan.PtrStruct && deep(p):
			structs = append(structs, MemCapture{Arg: i, Deep: -1})
		case a.Class == plan.String || a.Class == plan.PtrStruct || a.Class == plan.Buffer:
			rest = append(rest, MemCapture{Arg: i, Deep: -1})
		}
	}
	for _, pk := range p.Packets {
		if len(structs)+len(rest) < MaxCaps {
			structs = append(structs, MemCapture{Arg: pk.Arg, Deep: -1, Packet: true})
		}
	}
	for i, d := range p.Deep {
		if !d.Cut && len(structs)+len(rest) < MaxCaps {
			structs = append(structs, MemCapture{Arg: d.Arg, Deep: i})
		}
	}
	for i, w := range p.Windows {
		if len(structs)+len(rest) < MaxCaps {
			structs = append(structs, MemCapture{Arg: w.Arg, Deep: -1, Window: i + 1})
		}
	}
	for i, m := range p.Members {
		if len(structs)+len(rest) < MaxCaps {
			structs = append(structs, MemCapture{Arg: m.Arg, Deep: -1, Member: i + 1})
		}
	}
	caps := append(structs, rest...)
	if exit >= 0 && len(caps) < MaxCaps {
		caps = append(caps, MemCapture{Arg: exit, Deep: -1})
	}
	return caps
}

// deep says whether p has captures beyond its arguments' (PLAN_DEEP).
func deep(p *plan.Plan) bool {
	return len(p.Deep) > 0 || len(p.Packets) > 0 || len(p.Windows) > 0 || len(p.Members) > 0
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
	if p.Proto == nil {
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
				w.Src[a.Slot+s] = srcStack | uint16(int(loc.Offset)+8*s)
				continue
			}
			w.Src[a.Slot+s] = uint16(int(loc.Reg) + s)
		}
	}
	if inOrder(w, arch) {
		w.Flags |= planRegsInOrder
	}
	for _, i := range p.Track.Args {
		if a := p.Args[i]; a.Slot < MaxSlots {
			w.TrackSlots |= 1 << a.Slot
		}
	}
	if p.Track.Ret {
		w.Flags |= planTrackRet
	}
	if p.Track.Free {
		w.Flags |= planTrackFree
	}
	if p.Track.Drop {
		w.Flags |= planTrackDrop
	}
	caps := Captures(p)
	for i, cp := range caps {
		a := p.Args[cp.Arg]
		c := &w.Caps[i]
		c.Slot, c.Kind, c.Size = uint8(a.Slot), capMem, uint16(min(a.Budget, maxCap-1))
		if cp.Packet {
			if err := wirePacket(p, caps, &w, i); err != nil {
				return w, err
			}
			w.NrCaps++
			continue
		}
		if cp.Window > 0 {
			// The struct's bytes from Off: the program adds Off to
			// the argument's pointer.
			win := p.Windows[cp.Window-1]
			c.Size, c.Off = uint16(min(win.Size, maxCap-1)), uint16(win.Off)
			w.Flags |= planDeep
			w.NrCaps++
			continue
		}
		if cp.Member > 0 {
			if err := wireMember(p, caps, &w, i); err != nil {
				return w, err
			}
			w.NrCaps++
			continue
		}
		if cp.Deep >= 0 {
			if err := wireDeep(p, caps, &w, i); err != nil {
				return w, err
			}
			w.NrCaps++
			continue
		}
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

// wireDeep encodes capture i of caps, a Deep one: the capture of its
// parent and where the pointer is in the call's data, at the sum of the
// sizes of the structs captured before (PLAN_DEEP).
func wireDeep(p *plan.Plan, caps []MemCapture, w *bpf.CapturePlan, i int) error {
	d := p.Deep[caps[i].Deep]
	parent, at := heldIn(caps, w, i, MemCapture{Arg: d.Arg, Deep: d.Parent}, d.Off)
	if parent < 0 {
		return fmt.Errorf("%s: a struct behind argument %d has no captured parent", p.Func.Name, d.Arg+1)
	}
	c := &w.Caps[i]
	c.Slot, c.Kind, c.Size, c.Off = uint8(parent), capDeep, uint16(min(d.Budget, maxCap-1)), uint16(at)
	w.Flags |= planDeep
	return nil
}

// heldIn finds the capture holder among those before capture i, and where
// offset off of it is in the call's data, after the captures before it:
// -1 when holder is not captured before i.
func heldIn(caps []MemCapture, w *bpf.CapturePlan, i int, holder MemCapture, off int) (parent, at int) {
	parent = slices.Index(caps, holder)
	if parent < 0 || parent >= i {
		return -1, 0
	}
	at = off
	for j := range parent {
		at += int(w.Caps[j].Size)
	}
	return parent, at
}

// wireMember encodes capture i of caps, a Member: the capture of the
// struct that holds it, and where the char * or struct path is in the
// call's data, after the structs (PLAN_DEEP).
func wireMember(p *plan.Plan, caps []MemCapture, w *bpf.CapturePlan, i int) error {
	m := p.Members[caps[i].Member-1]
	parent, at := heldIn(caps, w, i, MemCapture{Arg: m.Arg, Deep: m.Parent}, m.Off)
	if parent < 0 {
		return fmt.Errorf("%s: a member behind argument %d has no captured struct", p.Func.Name, m.Arg+1)
	}
	c := &w.Caps[i]
	c.Slot, c.Kind, c.Size, c.Off = uint8(parent), capDeepStr, uint16(min(m.Budget, maxCap-1)), uint16(at)
	if m.Path {
		c.Kind = capPath
	}
	w.Flags |= planDeep
	return nil
}

// wirePacket encodes capture i of caps, the packet of an sk_buff
// argument: where its capture's head and network_header are in the
// call's data (PLAN_DEEP).
func wirePacket(p *plan.Plan, caps []MemCapture, w *bpf.CapturePlan, i int) error {
	arg := caps[i].Arg
	var pk plan.Packet
	for _, pk = range p.Packets {
		if pk.Arg == arg {
			break
		}
	}
	skb := slices.Index(caps, MemCapture{Arg: arg, Deep: -1})
	if skb < 0 || skb >= i || pk.Arg != arg {
		return fmt.Errorf("%s: the packet of argument %d has no captured sk_buff", p.Func.Name, arg+1)
	}
	at := 0
	for j := range skb {
		at += int(w.Caps[j].Size)
	}
	c := &w.Caps[i]
	c.Slot, c.Kind, c.Size = uint8(skb), capPkt, plan.PacketBytes
	c.Off, c.NetAt = uint16(at+pk.Head), uint16(at+pk.Network)
	w.Flags |= planDeep
	return nil
}

// Error kinds of a plan's return value, from internal/bpf/capture.h.
const (
	errNone = uint8(bpf.CaptureErrKindERR_NONE)
	errNeg  = uint8(bpf.CaptureErrKindERR_NEG)
	errPtr  = uint8(bpf.CaptureErrKindERR_PTR)
)

// errKind says how a function's return value tells an error: a negative
// errno for signed integers, NULL or ERR_PTR for pointers.
func errKind(p *plan.Plan) uint8 {
	switch p.Ret.Class {
	case plan.Signed:
		return errNeg
	case plan.Ptr, plan.PtrStruct, plan.String:
		return errPtr
	}
	return errNone
}

// CanFail reports whether --errors can tell an error from p's return
// value.
func CanFail(p *plan.Plan) bool { return errKind(p) != errNone }
