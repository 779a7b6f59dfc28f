// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf/asm"
)

// Stub is the function of the capture program whose body the filter
// replaces (trawl_filter in internal/bpf/filter.h).
const Stub = "trawl_filter"

// Func is the compiled filter of one function, by its plan index.
type Func struct {
	ID   uint32
	Body asm.Instructions
}

// Program builds the body of the stub for a program serving funcs: it
// dispatches on the record's func with a binary search, to bodies shared
// by functions that compiled to the same code. A function not in funcs
// fails the filter.
func Program(funcs []Func) (asm.Instructions, error) {
	funcs = slices.Clone(funcs)
	slices.SortFunc(funcs, func(a, b Func) int { return int(int64(a.ID) - int64(b.ID)) })
	var bodies []asm.Instructions
	index := map[string]int{}
	var ranges []idRange // consecutive IDs with the same body
	for _, f := range funcs {
		key := fmt.Sprint(f.Body)
		i, ok := index[key]
		if !ok {
			i = len(bodies)
			index[key] = i
			bodies = append(bodies, f.Body)
		}
		if n := len(ranges); n > 0 && ranges[n-1].body == i && ranges[n-1].hi+1 == f.ID {
			ranges[n-1].hi = f.ID
			continue
		}
		ranges = append(ranges, idRange{f.ID, f.ID, i})
	}

	var b builder
	reject := b.label()
	labels := make([]label, len(bodies))
	for i := range labels {
		labels[i] = b.label()
	}
	b.emit(asm.Mov.Reg(rRec, asm.R1))
	b.jump(asm.JEq.Imm(rRec, 0, ""), reject)
	if len(ranges) > 0 {
		b.emit(asm.LoadMem(asm.R0, rRec, funcOff, asm.Word))
		search(&b, ranges, labels, reject)
	}
	for i, body := range bodies {
		b.place(labels[i])
		b.emit(body...)
	}
	b.place(reject)
	b.emit(asm.Mov.Imm(asm.R0, 0), asm.Return())
	return b.finish()
}

type idRange struct {
	lo, hi uint32
	body   int
}

// search emits a binary search of R0 among ranges.
func search(b *builder, ranges []idRange, labels []label, reject label) {
	if len(ranges) == 1 {
		r := ranges[0]
		b.jump(asm.JLT.Imm(asm.R0, int32(r.lo), ""), reject)
		b.jump(asm.JGT.Imm(asm.R0, int32(r.hi), ""), reject)
		b.jump(asm.Ja.Label(""), labels[r.body])
		return
	}
	mid := len(ranges) / 2
	right := b.label()
	b.jump(asm.JGE.Imm(asm.R0, int32(ranges[mid].lo), ""), right)
	search(b, ranges[:mid], labels, reject)
	b.place(right)
	search(b, ranges[mid:], labels, reject)
}
