// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"slices"

	"github.com/cilium/ebpf/btf"
)

// PathBudget is the most bytes a file's path takes in a call's captured
// memory: the names of its dentries, each with a NUL.
const PathBudget = 256

// minStringBudget is the least room worth a string behind a member.
const minStringBudget = 16

// Member is what a member of a captured struct leads to, captured after
// every struct: the string behind a char * member, or the path of a
// struct path (a struct file's f_path, or a struct path itself), as the
// names of its dentries up to the root of its mount namespace.
type Member struct {
	// Parent is the capture whose bytes hold the member: the index in
	// Plan.Deep of a Deep, or -1 for argument Arg's own capture.
	Parent int
	// Arg is the argument the chain of pointers starts from.
	Arg int
	// Off is the member's byte offset in the parent's captured bytes:
	// the char * or the struct path.
	Off int
	// Path is set for a struct path's path, else the member is a string.
	Path bool
	// Budget is the most bytes the string or path takes.
	Budget int
}

// planMembers finds the strings and paths behind the members of the
// structs p captures, within what opts.CallBudget leaves: paths first,
// then strings in member order, at the nesting depths a decoder of
// Depth opts.Depth + 1 shows.
func planMembers(p *Plan, opts Options) {
	type parent struct {
		deep, arg int
		typ       btf.Type
		budget    int
		nest      int
	}
	var parents []parent
	used, caps := 0, 0
	for i, a := range p.Args {
		if a.Budget == 0 || caps == MaxCaptures {
			continue
		}
		used += a.Budget
		caps++
		if a.Class == PtrStruct {
			target, _ := pointee(a.Type)
			parents = append(parents, parent{deep: -1, arg: i, typ: target, budget: a.Budget})
		}
	}
	used += len(p.Packets) * PacketBytes
	caps += len(p.Packets)
	for _, w := range p.Windows {
		used += w.Size
		caps++
	}
	views := len(p.Members) // the strings views show, planned first
	for _, m := range p.Members {
		used += m.Budget
		caps++
	}
	for i, d := range p.Deep {
		if !d.Cut {
			used += d.Budget
			caps++
			parents = append(parents, parent{deep: i, arg: d.Arg, typ: d.Type, budget: d.Budget, nest: d.nest})
		}
	}
	add := func(pa parent, off, budget int, path bool) bool {
		budget = min(budget, opts.CallBudget-used)
		if caps == MaxCaptures || budget < minStringBudget {
			return false
		}
		p.Members = append(p.Members, Member{Parent: pa.deep, Arg: pa.arg, Off: off, Path: path, Budget: budget})
		used += budget
		caps++
		return true
	}
	for _, pa := range parents {
		if off, ok := pathOffset(pa.typ); ok && off+16 <= pa.budget {
			add(pa, off, PathBudget, true)
		}
	}
	maxNest := max(opts.Depth, 1) + 1
	for _, pa := range parents {
		for _, off := range stringMembers(pa.typ, 0, pa.nest+1, maxNest) {
			planned := slices.ContainsFunc(p.Members[:views], func(m Member) bool {
				return m.Parent == pa.deep && m.Arg == pa.arg && m.Off == off
			})
			if off+8 <= pa.budget && !planned && !add(pa, off, opts.StringBudget, false) {
				return
			}
		}
	}
}

// pathOffset returns the byte offset of the struct path whose path a
// struct of type t shows: a struct file's f_path, or a struct path.
func pathOffset(t btf.Type) (int, bool) {
	s, ok := btf.UnderlyingType(t).(*btf.Struct)
	if !ok {
		return 0, false
	}
	switch s.Name {
	case "file":
		off, ok := memberOffset(s, "f_path", 16)
		return off, ok && isPath(memberType(s, "f_path"))
	case "path":
		return 0, isPath(s)
	}
	return 0, false
}

// isPath says whether t is a struct path of a mount pointer and a dentry
// pointer, as CAP_PATH reads it.
func isPath(t btf.Type) bool {
	p, ok := btf.UnderlyingType(t).(*btf.Struct)
	if !ok || p.Name != "path" {
		return false
	}
	mnt, ok1 := memberOffset(p, "mnt", 8)
	dentry, ok2 := memberOffset(p, "dentry", 8)
	return ok1 && ok2 && mnt == 0 && dentry == 8
}

// memberType returns the type of member name of t, looking into
// anonymous structs and unions; nil if it has none.
func memberType(t btf.Type, name string) btf.Type {
	members := membersOf(t)
	for _, m := range members {
		if m.Name == name {
			return m.Type
		}
		if m.Name == "" {
			if t := memberType(m.Type, name); t != nil {
				return t
			}
		}
	}
	return nil
}

// stringMembers lists the byte offsets of the members of struct or union
// t, at byte offset base, that point to a string: a char *, or the name
// of a struct qstr (a dentry's name), members of embedded structs and
// unions included, in member order, nested at most maxNest deep.
func stringMembers(t btf.Type, base, nest, maxNest int) []int {
	var out []int
	walkPointers(t, base, nest, maxNest, func(in btf.Type, m btf.Member, p *btf.Pointer, off, _ int) {
		s, _ := btf.UnderlyingType(in).(*btf.Struct)
		qstr := s != nil && s.Name == "qstr"
		target, _ := pointee(p)
		if i, ok := target.(*btf.Int); ok && (i.Name == "char" || qstr && m.Name == "name" && i.Size == 1) {
			out = append(out, off)
		}
	})
	return out
}
