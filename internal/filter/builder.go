// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"fmt"
	"math"

	"github.com/cilium/ebpf/asm"
)

// label is a position in the code, placed once, jumped to from anywhere.
type label int

// builder appends instructions and resolves jumps to labels.
type builder struct {
	insns  asm.Instructions
	at     []int // instruction index of each label, -1 until placed
	fixups []fixup
}

type fixup struct {
	insn int
	to   label
}

func (b *builder) label() label {
	b.at = append(b.at, -1)
	return label(len(b.at) - 1)
}

// place puts l at the next instruction.
func (b *builder) place(l label) { b.at[l] = len(b.insns) }

func (b *builder) emit(insns ...asm.Instruction) { b.insns = append(b.insns, insns...) }

// jump emits a jump instruction that goes to l.
func (b *builder) jump(ins asm.Instruction, l label) {
	b.fixups = append(b.fixups, fixup{len(b.insns), l})
	b.insns = append(b.insns, ins)
}

// finish resolves the jumps. The result is position independent.
func (b *builder) finish() (asm.Instructions, error) {
	raw := make([]int, len(b.insns)+1) // raw offset of each instruction
	for i, ins := range b.insns {
		raw[i+1] = raw[i] + int(ins.Size()/asm.InstructionSize)
	}
	for _, f := range b.fixups {
		to := b.at[f.to]
		if to < 0 || to >= len(b.insns) {
			return nil, fmt.Errorf("internal error: label %d placed at %d of %d instructions", f.to, to, len(b.insns))
		}
		off := raw[to] - raw[f.insn] - 1
		if off > math.MaxInt16 || off < math.MinInt16 {
			return nil, fmt.Errorf("filter program too large (a jump of %d instructions): select fewer functions", off)
		}
		b.insns[f.insn].Offset = int16(off)
	}
	return b.insns, nil
}
