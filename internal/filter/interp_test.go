// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// machine runs the BPF instructions filters are made of, on a fake
// record, stack and kernel and user memory, checking what the verifier
// would: known registers, stack bounds, known helpers.
type machine struct {
	record []byte
	kernel map[uint64][]byte // address -> bytes there
	user   map[uint64][]byte
	steps  int
	// writeRecord lets the program write the record (--show writes its
	// frame), not only the stack.
	writeRecord bool
}

const (
	recordBase = 1 << 40 // where the record seems to live
	stackTop   = 1 << 41 // the frame pointer
	stackSize  = 512
)

// run runs prog with the record in R1 and returns R0.
func (m *machine) run(prog asm.Instructions) (uint64, error) {
	var regs [11]uint64
	known := [11]bool{asm.R1: true, asm.R10: true}
	stack := make([]byte, stackSize)
	regs[asm.R1], regs[asm.R10] = recordBase, stackTop
	raw := map[int]int{} // raw offset -> instruction index
	off := 0
	for i, ins := range prog {
		raw[off] = i
		off += int(ins.Size() / asm.InstructionSize)
	}
	rawOf := func(i int) int {
		o := 0
		for _, ins := range prog[:i] {
			o += int(ins.Size() / asm.InstructionSize)
		}
		return o
	}
	mem := func(addr uint64, n int) ([]byte, error) {
		switch {
		case addr >= stackTop-stackSize && addr+uint64(n) <= stackTop:
			return stack[addr-(stackTop-stackSize):][:n], nil
		case addr >= recordBase && addr+uint64(n) <= recordBase+uint64(len(m.record)):
			return m.record[addr-recordBase:][:n], nil
		}
		return nil, fmt.Errorf("access of %d bytes at %#x outside the stack and the record", n, addr)
	}
	for pc := 0; pc < len(prog); {
		m.steps++
		if m.steps > 100000 {
			return 0, fmt.Errorf("no exit after %d steps", m.steps)
		}
		ins := prog[pc]
		op := ins.OpCode
		src := func() (uint64, error) {
			if op.Source() == asm.ImmSource {
				return uint64(ins.Constant), nil
			}
			if !known[ins.Src] {
				return 0, fmt.Errorf("insn %d (%v): read of unset %s", pc, ins, ins.Src)
			}
			return regs[ins.Src], nil
		}
		next := pc + 1
		switch {
		case ins.IsLoadFromMap() || ins.IsConstantLoad(asm.DWord):
			regs[ins.Dst], known[ins.Dst] = uint64(ins.Constant), true
		case op.Class() == asm.ALU64Class:
			v, err := src()
			if err != nil {
				return 0, err
			}
			if op.ALUOp() != asm.Mov && op.ALUOp() != asm.Neg && !known[ins.Dst] {
				return 0, fmt.Errorf("insn %d (%v): read of unset %s", pc, ins, ins.Dst)
			}
			d := &regs[ins.Dst]
			switch op.ALUOp() {
			case asm.Mov:
				*d = v
			case asm.Add:
				*d += v
			case asm.And:
				*d &= v
			case asm.Or:
				*d |= v
			case asm.LSh:
				*d <<= v & 63
			case asm.RSh:
				*d >>= v & 63
			case asm.ArSh:
				*d = uint64(int64(*d) >> (v & 63))
			case asm.Neg:
				*d = -*d
			default:
				return 0, fmt.Errorf("insn %d: unexpected ALU op %v", pc, ins)
			}
			known[ins.Dst] = true
		case op.Class() == asm.LdXClass:
			if !known[ins.Src] {
				return 0, fmt.Errorf("insn %d (%v): load through unset %s", pc, ins, ins.Src)
			}
			b, err := mem(regs[ins.Src]+uint64(int64(ins.Offset)), ins.OpCode.Size().Sizeof())
			if err != nil {
				return 0, fmt.Errorf("insn %d (%v): %w", pc, ins, err)
			}
			regs[ins.Dst], known[ins.Dst] = le(b), true
		case op.Class() == asm.StClass || op.Class() == asm.StXClass:
			v := uint64(ins.Constant)
			if op.Class() == asm.StXClass {
				if !known[ins.Src] {
					return 0, fmt.Errorf("insn %d (%v): store of unset %s", pc, ins, ins.Src)
				}
				v = regs[ins.Src]
			}
			if ins.Dst != asm.RFP && !m.writeRecord {
				return 0, fmt.Errorf("insn %d (%v): store outside the stack", pc, ins)
			}
			b, err := mem(regs[ins.Dst]+uint64(int64(ins.Offset)), ins.OpCode.Size().Sizeof())
			if err != nil {
				return 0, fmt.Errorf("insn %d (%v): %w", pc, ins, err)
			}
			var buf [8]byte
			binary.LittleEndian.PutUint64(buf[:], v)
			copy(b, buf[:])
		case op.JumpOp() == asm.Exit:
			if !known[asm.R0] {
				return 0, fmt.Errorf("insn %d: exit with R0 unset", pc)
			}
			return regs[asm.R0], nil
		case op.JumpOp() == asm.Call:
			if err := m.call(asm.BuiltinFunc(ins.Constant), &regs, stack); err != nil {
				return 0, fmt.Errorf("insn %d: %w", pc, err)
			}
			for r := asm.R1; r <= asm.R5; r++ {
				known[r] = false
			}
			known[asm.R0] = true
		case op.Class().IsJump():
			if !known[ins.Dst] {
				return 0, fmt.Errorf("insn %d (%v): jump on unset %s", pc, ins, ins.Dst)
			}
			v, err := src()
			if err != nil {
				return 0, err
			}
			d := regs[ins.Dst]
			var taken bool
			switch op.JumpOp() {
			case asm.Ja:
				taken = true
			case asm.JEq:
				taken = d == v
			case asm.JNE:
				taken = d != v
			case asm.JGT:
				taken = d > v
			case asm.JGE:
				taken = d >= v
			case asm.JLT:
				taken = d < v
			case asm.JLE:
				taken = d <= v
			case asm.JSGT:
				taken = int64(d) > int64(v)
			case asm.JSGE:
				taken = int64(d) >= int64(v)
			case asm.JSLT:
				taken = int64(d) < int64(v)
			case asm.JSLE:
				taken = int64(d) <= int64(v)
			default:
				return 0, fmt.Errorf("insn %d: unexpected jump %v", pc, ins)
			}
			if taken {
				to, ok := raw[rawOf(pc)+1+int(ins.Offset)]
				if !ok {
					return 0, fmt.Errorf("insn %d (%v): jump into nowhere", pc, ins)
				}
				if to <= pc {
					return 0, fmt.Errorf("insn %d (%v): backward jump", pc, ins)
				}
				next = to
			}
		default:
			return 0, fmt.Errorf("insn %d: unexpected instruction %v", pc, ins)
		}
		pc = next
	}
	return 0, fmt.Errorf("ran off the end")
}

func le(b []byte) uint64 {
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

// find returns the bytes of a fake memory at addr, n long.
func find(space map[uint64][]byte, addr uint64, n int) ([]byte, bool) {
	for base, b := range space {
		if addr >= base && addr+uint64(n) <= base+uint64(len(b)) {
			return b[addr-base:][:n], true
		}
	}
	return nil, false
}

// call runs a helper: the probe reads, with the kernel's semantics.
func (m *machine) call(fn asm.BuiltinFunc, regs *[11]uint64, stack []byte) error {
	dst, size, src := regs[asm.R1], int(regs[asm.R2]), regs[asm.R3]
	var out []byte
	switch {
	case size <= 0:
		return fmt.Errorf("%v of %d bytes", fn, size)
	case dst >= stackTop-stackSize && dst+uint64(size) <= stackTop:
		out = stack[dst-(stackTop-stackSize):][:size]
	case m.writeRecord && dst >= recordBase && dst+uint64(size) <= recordBase+uint64(len(m.record)):
		// --show writes strings into the frame.
		out = m.record[dst-recordBase:][:size]
	default:
		return fmt.Errorf("%v into %d bytes at %#x, outside the stack and the record", fn, size, dst)
	}
	space := m.kernel
	if fn == asm.FnProbeReadUserStr || fn == asm.FnProbeReadUser {
		space = m.user
	}
	const efault = ^uint64(13) // -14
	switch fn {
	case asm.FnProbeReadKernel, asm.FnProbeReadUser:
		b, ok := find(space, src, size)
		if !ok {
			clear(out)
			regs[asm.R0] = efault
			return nil
		}
		copy(out, b)
		regs[asm.R0] = 0
	case asm.FnProbeReadKernelStr, asm.FnProbeReadUserStr:
		for i := 0; i < size; i++ {
			b, ok := find(space, src+uint64(i), 1)
			if !ok {
				regs[asm.R0] = efault
				return nil
			}
			if i == size-1 || b[0] == 0 {
				out[i] = 0
				regs[asm.R0] = uint64(i + 1)
				return nil
			}
			out[i] = b[0]
		}
	default:
		return fmt.Errorf("unexpected helper %v", fn)
	}
	return nil
}
