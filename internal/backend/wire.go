package backend

import (
	"fmt"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// Limits of the BPF program, mirrored from internal/bpf/capture.h.
const (
	MaxSlots = 12
	MaxCaps  = 12
	maxCap   = 512
	srcStack = 0x8000
	capMem   = 1
	capStr   = 2
)

// Regs says where a kprobe program finds registers in struct pt_regs, from
// the kernel's own BTF.
type Regs struct {
	Size uint16 // sizeof(struct pt_regs)
	SP   uint16 // the stack pointer
	Ret  uint16 // the return value register
	Args []uint16
}

// regNames are the pt_regs members holding arguments and the return value:
// x86-64 names each register; arm64 has the array regs[31].
var regNames = map[plan.Arch]struct {
	args     []string
	ret, sp  string
	regArray bool
}{
	plan.AMD64: {args: []string{"di", "si", "dx", "cx", "r8", "r9"}, ret: "ax", sp: "sp"},
	plan.ARM64: {args: []string{"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"}, sp: "sp", regArray: true},
}

// RegsLayout reads the layout of struct pt_regs from the kernel's BTF.
func RegsLayout(spec *btf.Spec, arch plan.Arch) (Regs, error) {
	var s *btf.Struct
	if err := spec.TypeByName("pt_regs", &s); err != nil {
		return Regs{}, fmt.Errorf("find struct pt_regs in kernel BTF: %w", err)
	}
	offsets := map[string]uint16{}
	var collect func(members []btf.Member, base uint32)
	collect = func(members []btf.Member, base uint32) {
		for _, m := range members {
			off := base + uint32(m.Offset)/8
			switch t := btf.UnderlyingType(m.Type).(type) {
			case *btf.Struct:
				collect(t.Members, off)
			case *btf.Union:
				collect(t.Members, off)
			}
			if m.Name != "" {
				if _, seen := offsets[m.Name]; !seen {
					offsets[m.Name] = uint16(off)
				}
			}
		}
	}
	collect(s.Members, 0)
	names := regNames[arch]
	r := Regs{Size: uint16(s.Size)}
	get := func(name string) (uint16, error) {
		off, ok := offsets[name]
		if !ok {
			return 0, fmt.Errorf("struct pt_regs has no member %s", name)
		}
		return off, nil
	}
	var err error
	if r.SP, err = get(names.sp); err != nil {
		return Regs{}, err
	}
	if names.regArray {
		base, err := get("regs")
		if err != nil {
			return Regs{}, err
		}
		for i := range names.args {
			r.Args = append(r.Args, base+uint16(8*i))
		}
		r.Ret = base
		return r, nil
	}
	if r.Ret, err = get(names.ret); err != nil {
		return Regs{}, err
	}
	for _, n := range names.args {
		off, err := get(n)
		if err != nil {
			return Regs{}, err
		}
		r.Args = append(r.Args, off)
	}
	return r, nil
}

// CapturedArgs returns the indexes of the arguments whose memory the BPF
// program copies, in the order of its captures: strings and pointers to
// structs or unions with a budget, at most MaxCaps.
func CapturedArgs(p *plan.Plan) []int {
	var idx []int
	for i, a := range p.Args {
		if (a.Class == plan.String || a.Class == plan.PtrStruct) && a.Budget > 0 && a.Slot < MaxSlots && len(idx) < MaxCaps {
			idx = append(idx, i)
		}
	}
	return idx
}

// Wire encodes a plan for the BPF program. regs is only used for kprobe
// backends; arch picks the kprobe locations.
func Wire(p *plan.Plan, arch plan.Arch, regs Regs) (bpf.CapturePlan, error) {
	var w bpf.CapturePlan
	if p.NumSlots > MaxSlots {
		return w, fmt.Errorf("%s has %d argument slots, trawl reads %d", p.Func.Name, p.NumSlots, MaxSlots)
	}
	w.NrSlots = uint8(p.NumSlots)
	w.ErrKind, w.RetSize = errKind(p), uint8(p.Ret.Size)
	if p.Func.Proto == nil {
		// No prototype: read the argument registers raw (kprobes only;
		// trampolines need BTF).
		w.NrSlots = uint8(min(len(regs.Args), MaxSlots))
		copy(w.Src[:], regs.Args)
	}
	for _, a := range p.Args {
		loc := a.Kprobe[arch]
		for s := 0; s < a.NumSlots && a.Slot+s < MaxSlots; s++ {
			if loc.Kind == plan.OnStack {
				w.Src[a.Slot+s] = srcStack | uint16(loc.Offset+8*s)
				continue
			}
			if reg := loc.Reg + s; reg < len(regs.Args) {
				w.Src[a.Slot+s] = regs.Args[reg]
			}
		}
	}
	for i, arg := range CapturedArgs(p) {
		a := p.Args[arg]
		c := &w.Caps[i]
		c.Slot, c.Kind, c.Size = uint8(a.Slot), capMem, uint16(min(a.Budget, maxCap-1))
		if a.Class == plan.String {
			c.Kind = capStr
		}
		w.NrCaps++
	}
	return w, nil
}
