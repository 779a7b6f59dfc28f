// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
)

// layout is how a struct or union type is shown, computed once per type.
type layout struct {
	all  []field     // Full: every member, anonymous ones flattened
	pick []field     // default view candidates: one union alternative, no padding
	view []viewField // the well-known view of the type, if it has one
	// short makes the string the view reads as, if it reads as one
	short func(map[string]*call.Value) string
	sock  *sockView // a socket's addresses, for its view
	skb   *skbView  // an sk_buff's packet, for its view
	path  int       // the byte offset of the struct path it shows the path of, or -1
}

// field is a member of a struct, with anonymous members flattened into their
// parent: off is relative to the outermost struct.
type field struct {
	name      string
	typ       btf.Type // resolved type
	be        bool     // big-endian typedef
	off       uint32   // offset in bits
	bits      uint32   // bitfield width, 0 if not a bitfield
	size      uint32   // size in bytes, if not a bitfield
	composite bool     // struct, union or array other than a string
	hex       bool     // integers read best in hexadecimal
}

// fieldState says whether a field's bytes were captured and are non-zero.
type fieldState uint8

const (
	missing fieldState = iota
	zero
	nonZero
)

func (f *field) state(raw []byte) fieldState {
	if f.bits != 0 {
		x, ok := readBits(raw, uint(f.off), uint(f.bits))
		switch {
		case !ok:
			return missing
		case x == 0:
			return zero
		}
		return nonZero
	}
	start := int(f.off / 8)
	if start >= len(raw) || (!f.composite && start+int(f.size) > len(raw)) {
		return missing
	}
	b := raw[start:min(start+int(f.size), len(raw))]
	if len(b) == 8 { // most members: longs and pointers
		if binary.LittleEndian.Uint64(b) == 0 {
			return zero
		}
		return nonZero
	}
	for _, c := range b {
		if c != 0 {
			return nonZero
		}
	}
	return zero
}

// maxNest bounds the flattening of anonymous members in malformed BTF in
// depth, and maxMembers in breadth: the members it visits in all, which an
// anonymous type that holds the same anonymous type twice, and so on,
// would make 2^maxNest times as many. The kernel's largest structs
// flatten to a few hundred.
const (
	maxNest    = 16
	maxMembers = 8192
)

// layout returns the layout of t, made on first use.
func (d *Decoder) layout(t btf.Type) *layout {
	if t == d.lastType && d.last != nil {
		return d.last
	}
	if p, ok := d.layouts[t]; ok {
		d.last, d.lastType = p, t
		return p
	}
	p := &layout{path: -1}
	members := membersOf(t)
	p.all = flatten(nil, members, 0, true, 0)
	if _, ok := t.(*btf.Union); ok {
		members = alternative(members)
	}
	p.pick = flatten(nil, members, 0, false, 0)
	if s, ok := t.(*btf.Struct); ok {
		if !shortViews[s.Name] || d.opts.Depth <= DefaultDepth {
			p.view = viewOf(s)
			p.short = shortForms[s.Name]
		}
		p.sock = sockViewOf(s)
		p.skb = skbViewOf(s)
		p.path = pathOf(s)
	}
	d.layouts[t] = p
	d.last, d.lastType = p, t
	return p
}

func membersOf(t btf.Type) []btf.Member {
	switch t := t.(type) {
	case *btf.Struct:
		return t.Members
	case *btf.Union:
		return t.Members
	}
	return nil
}

// flatten appends members to out, descending into anonymous structs and
// unions. With all false, only one alternative of an anonymous union is kept
// and padding is dropped. It visits at most maxMembers members.
func flatten(out []field, members []btf.Member, base uint32, all bool, nest int) []field {
	budget := maxMembers
	return flattenAt(out, members, base, all, nest, &budget)
}

// flattenAt is flatten, visiting at most *budget members more.
func flattenAt(out []field, members []btf.Member, base uint32, all bool, nest int, budget *int) []field {
	for _, m := range members {
		if *budget <= 0 {
			return out
		}
		*budget--
		off := base + uint32(m.Offset)
		u, be := resolve(m.Type)
		if m.Name == "" {
			sub := membersOf(u)
			if _, ok := u.(*btf.Union); ok && !all {
				sub = alternative(sub)
			}
			if nest < maxNest {
				out = flattenAt(out, sub, off, all, nest+1, budget)
			}
			continue // an unnamed scalar is padding
		}
		f := field{name: m.Name, typ: u, be: be, off: off, bits: uint32(m.BitfieldSize), hex: isHexName(m.Name)}
		if f.bits == 0 {
			size, err := btf.Sizeof(u)
			if err != nil {
				size = 0
			}
			f.size = uint32(size)
		}
		switch u := u.(type) {
		case *btf.Struct, *btf.Union:
			f.composite = true
		case *btf.Array:
			e, _ := resolve(u.Type)
			i, ok := e.(*btf.Int)
			f.composite = !ok || !isChar(i)
		}
		if f.bits == 0 && f.size == 0 {
			continue // markers such as zero-length arrays hold no data
		}
		if !all && isPadding(f.name) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// alternative picks the union alternative the default view shows: the first
// anonymous struct (it holds named fields, as struct_group and the kernel's
// address and port pairs do), else the first member.
func alternative(members []btf.Member) []btf.Member {
	for i, m := range members {
		if _, ok := m.Type.(*btf.Struct); ok && m.Name == "" {
			return members[i : i+1]
		}
	}
	return members[:min(1, len(members))]
}

// isPadding reports members the default view never shows by their name:
// padding, reserved space and cache line markers.
func isPadding(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"pad", "reserved", "rsvd", "unused", "__cacheline"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// isHexName reports member names of integers that read best in hex.
func isHexName(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "flag") || strings.Contains(n, "mask") || strings.HasSuffix(n, "mode")
}

// lookup finds the member at a dotted path of member names in t.
func lookup(t btf.Type, path string) (field, bool) {
	var f field
	fields := flatten(nil, membersOf(t), 0, true, 0)
	for name := range strings.SplitSeq(path, ".") {
		found := false
		for _, g := range fields {
			if g.name == name {
				g.off += f.off
				f, found = g, true
				break
			}
		}
		if !found {
			return field{}, false
		}
		fields = flatten(nil, membersOf(f.typ), 0, true, 0)
	}
	return f, true
}

// enumName names x as a value of e: its enumerator, flags joined by '|' for
// flag-style enums, or "".
func enumName(e *btf.Enum, x uint64) string {
	for _, v := range e.Values {
		if v.Value == x {
			return v.Name
		}
	}
	if x == 0 || !isFlags(e) {
		return ""
	}
	var b strings.Builder
	rest := x
	for _, v := range e.Values {
		if x&v.Value != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(v.Name)
			rest &^= v.Value
		}
	}
	if rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x")
		b.WriteString(strconv.FormatUint(rest, 16))
	}
	return b.String()
}

// isFlags reports a flag-style enum: at least two values, each a power of two.
func isFlags(e *btf.Enum) bool {
	if len(e.Values) < 2 {
		return false
	}
	for _, v := range e.Values {
		if v.Value == 0 || v.Value&(v.Value-1) != 0 {
			return false
		}
	}
	return true
}
