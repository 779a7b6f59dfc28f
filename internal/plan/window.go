// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/decode"
)

// Window is a run of bytes of the struct an argument points to, past
// those the argument's Budget copies: a member its view shows (a task's
// pid and comm, a network device's name), which lies too far into a
// large struct for the struct to be copied up to it.
type Window struct {
	// Arg is the argument.
	Arg int
	// Off is the run's byte offset in the struct.
	Off int
	// Size is the run's length in bytes.
	Size int
}

// planViews plans what the views of p's struct arguments show beyond
// the bytes copied from their start, within what opts.CallBudget leaves
// of those: the windows of their members past them, and the strings
// their char * members point to (a dentry's name), before any deeper
// capture, as they are what the default view shows.
func planViews(p *Plan, opts Options) {
	used, caps := captured(p)
	for i, a := range p.Args {
		if a.Class != PtrStruct || a.Budget == 0 {
			continue
		}
		target, _ := pointee(a.Type)
		s, ok := btf.UnderlyingType(target).(*btf.Struct)
		if !ok {
			continue
		}
		for _, path := range decode.ViewMembers(s.Name, opts.Depth) {
			off, t, ok := memberAt(s, path)
			size, err := btf.Sizeof(t)
			if !ok || err != nil || size <= 0 {
				continue
			}
			if isString(t) && off+size <= a.Budget {
				size = min(opts.StringBudget, opts.CallBudget-used)
				if size < minStringBudget || caps == MaxCaptures {
					return
				}
				p.Members = append(p.Members, Member{Parent: -1, Arg: i, Off: off, Budget: size})
			} else if off+size > a.Budget && size <= maxWindow && off <= maxWindowOff {
				if used+size > opts.CallBudget || caps == MaxCaptures {
					return
				}
				p.Windows = append(p.Windows, Window{Arg: i, Off: off, Size: size})
			} else {
				continue
			}
			used += size
			caps++
		}
	}
}

// maxWindow is the largest member a window copies, and maxWindowOff
// the furthest offset the capture program takes.
const (
	maxWindow    = 64
	maxWindowOff = 1<<16 - 1
)

// captured returns the bytes and the number of captures that p's
// arguments and packets take.
func captured(p *Plan) (used, caps int) {
	for _, a := range p.Args {
		if a.Budget == 0 || caps == MaxCaptures {
			continue
		}
		used += a.Budget
		caps++
	}
	used += len(p.Packets) * PacketBytes
	caps += len(p.Packets)
	return used, caps
}

// memberAt returns the byte offset and type of the member of t at a
// dotted path of member names, looking into anonymous structs and
// unions; false for a bitfield or a path t lacks.
func memberAt(t btf.Type, path string) (off int, typ btf.Type, ok bool) {
	for name := range strings.SplitSeq(path, ".") {
		at, m, found := member(t, name)
		if !found || m.BitfieldSize != 0 {
			return 0, nil, false
		}
		off += at
		t = m.Type
	}
	return off, t, true
}

// isString says whether t points to a string: to bytes, char or not
// (a qstr's name is an unsigned char *).
func isString(t btf.Type) bool {
	target, _ := pointee(t)
	i, ok := target.(*btf.Int)
	return ok && i.Size == 1
}

// member finds member name of struct or union t, looking into anonymous
// members, and its byte offset.
func member(t btf.Type, name string) (int, btf.Member, bool) {
	for _, m := range membersOf(t) {
		if m.Name == name {
			return int(m.Offset / 8), m, true
		}
		if m.Name == "" {
			if at, sub, ok := member(m.Type, name); ok {
				return int(m.Offset/8) + at, sub, true
			}
		}
	}
	return 0, btf.Member{}, false
}
