// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"github.com/cilium/ebpf/btf"
)

// DefaultCallBudget is the bytes a call captures in all by default: its
// arguments' memory and the structs Options.Depth reaches beyond them.
// It is the capture program's MAX_DATA, the most it copies per call.
const DefaultCallBudget = 1024

// MaxCaptures is the most memory captures a plan has: the capture
// program's MAX_CAPS.
const MaxCaptures = 12

// linkTypes are structs that only link others (list and tree nodes): a
// pointer to one leads to another node's links, not to data.
var linkTypes = map[string]bool{
	"list_head": true, "hlist_head": true, "hlist_node": true, "hlist_bl_node": true,
	"hlist_nulls_node": true, "llist_node": true, "rb_node": true, "rb_root": true,
	"callback_head": true, "list_lru_one": true,
}

// Deep is a struct or union captured behind a pointer that captured
// memory holds, rather than an argument: with Options.Depth above 1, the
// members of a captured struct that point to structs are captured too,
// level by level, in member order, as long as the per-call budget lasts.
type Deep struct {
	// Parent is the capture whose bytes hold the pointer: the index in
	// Plan.Deep of another Deep, or -1 for argument Arg's own capture.
	Parent int
	// Arg is the argument the chain of pointers starts from.
	Arg int
	// Off is the pointer's byte offset in the parent's captured bytes.
	Off int
	// Type is the struct or union pointed to.
	Type btf.Type
	// Budget is the bytes to copy behind the pointer; 0 if Cut.
	Budget int
	// Level is how many pointers lead to it from the argument's slot: 2
	// for a struct a member of the argument's struct points to.
	Level int
	// Cut is set when the per-call budget (or the capture program's
	// number of captures) left the struct out: it is not captured.
	Cut bool
	// nest is the nesting depth of its members as a decoder counts it.
	nest int
}

// planDeep finds the deeper captures of p for opts.Depth, within
// opts.CallBudget: breadth first from the arguments' structs.
func planDeep(p *Plan, opts Options) {
	if opts.Depth < 2 {
		return
	}
	used, caps := 0, 0
	type parent struct {
		deep   int // index in p.Deep, -1 for the argument
		arg    int
		typ    btf.Type
		budget int
		level  int
		nest   int
	}
	var queue []parent
	for i, a := range p.Args {
		if a.Budget == 0 || caps == MaxCaptures {
			continue
		}
		if a.Class != String && a.Class != PtrStruct && a.Class != Buffer {
			continue
		}
		used += a.Budget
		caps++
		if a.Class == PtrStruct {
			target, _ := pointee(a.Type)
			queue = append(queue, parent{deep: -1, arg: i, typ: target, budget: a.Budget, level: 1})
		}
	}
	used += len(p.Packets) * PacketBytes
	caps += len(p.Packets)
	for _, w := range p.Windows {
		used += w.Size
		caps++
	}
	for _, m := range p.Members {
		used += m.Budget
		caps++
	}
	for len(queue) > 0 {
		pa := queue[0]
		queue = queue[1:]
		if pa.level >= opts.Depth {
			continue
		}
		for _, m := range pointerMembers(pa.typ, 0, pa.nest+1, opts.Depth) {
			if m.off+8 > pa.budget {
				continue
			}
			d := Deep{Parent: pa.deep, Arg: pa.arg, Off: m.off, Type: m.target, Level: pa.level + 1, nest: m.nest}
			n, err := btf.Sizeof(m.target)
			if err != nil || n <= 0 {
				continue
			}
			budget := min(n, opts.StructBudget)
			if used+budget > opts.CallBudget || caps == MaxCaptures {
				d.Cut = true
				p.Deep = append(p.Deep, d)
				continue
			}
			used += budget
			caps++
			d.Budget = budget
			p.Deep = append(p.Deep, d)
			queue = append(queue, parent{deep: len(p.Deep) - 1, arg: pa.arg, typ: m.target, budget: budget, level: d.Level, nest: m.nest})
		}
	}
}

// pointerMember is a member pointing to a struct or union worth following.
type pointerMember struct {
	off    int // bytes from the start of the outermost struct
	target btf.Type
	nest   int // its nesting depth as a decoder counts it
}

// pointerMembers lists the members of struct or union t, at byte offset
// base, that point to a struct or union worth following, members of
// embedded structs and unions included, in member order. Members nested
// deeper than maxNest are left out, as a decoder would not show them.
func pointerMembers(t btf.Type, base, nest, maxNest int) []pointerMember {
	var out []pointerMember
	walkPointers(t, base, nest, maxNest, func(_ btf.Type, _ btf.Member, p *btf.Pointer, off, nest int) {
		if target, ok := followable(p); ok {
			out = append(out, pointerMember{off: off, target: target, nest: nest})
		}
	})
	return out
}

// walkPointers calls visit for each pointer member of struct or union t,
// at byte offset base, with the struct or union in that holds it: members
// of embedded structs and unions included, in member order, t's own at
// nesting depth nest, none nested deeper than maxNest. Bitfields and
// members off a byte boundary are left out.
func walkPointers(t btf.Type, base, nest, maxNest int, visit func(in btf.Type, m btf.Member, p *btf.Pointer, off, nest int)) {
	if nest > maxNest {
		return
	}
	for _, m := range membersOf(t) {
		if m.BitfieldSize != 0 || m.Offset%8 != 0 {
			continue
		}
		off := base + int(m.Offset/8)
		switch u := btf.UnderlyingType(m.Type).(type) {
		case *btf.Struct, *btf.Union:
			walkPointers(u, off, nest+1, maxNest, visit)
		case *btf.Pointer:
			visit(t, m, u, off, nest)
		}
	}
}

// followable says whether a pointer leads to a struct or union worth
// capturing: not const (tables of operations are, and show better as
// their symbol) and not a list or tree node.
func followable(p *btf.Pointer) (btf.Type, bool) {
	t := p.Target
	for range 16 {
		switch v := t.(type) {
		case *btf.Const:
			return nil, false
		case *btf.Volatile:
			t = v.Type
		case *btf.TypeTag:
			t = v.Type
		case *btf.Typedef:
			t = v.Type
		case *btf.Restrict:
			t = v.Type
		case *btf.Struct:
			return v, !linkTypes[v.Name]
		case *btf.Union:
			return v, true
		default:
			return nil, false
		}
	}
	return nil, false
}

// membersOf returns the members of struct or union t (through typedefs
// and qualifiers), nil for any other type.
func membersOf(t btf.Type) []btf.Member {
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		return u.Members
	case *btf.Union:
		return u.Members
	}
	return nil
}
