// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
)

// pathOf returns the byte offset of the struct path whose path a struct
// file (its f_path) or a struct path shows, -1 for other structs.
func pathOf(s *btf.Struct) int {
	switch s.Name {
	case "file":
		if f, ok := lookup(s, "f_path"); ok && f.bits == 0 && f.size == 16 {
			return int(f.off / 8)
		}
	case "path":
		return 0
	}
	return -1
}

// withPath puts the path captured for the struct path at byte offset at
// of raw first in out's members, named path, if it was captured.
func withPath(out *call.Value, raw []byte, at int, pointees map[*byte]Pointee) {
	if at+8 > len(raw) {
		return
	}
	pt, ok := pointees[&raw[at]]
	if !ok || pt.Path == nil {
		return
	}
	path, ok := joinPath(pt.Path)
	if !ok {
		return
	}
	p := call.Value{Kind: call.KindString, Name: "path", Str: path}
	out.Fields = append([]call.Value{p}, out.Fields...)
}

// joinPath makes a path of the names of its dentries from the last up,
// each NUL-terminated, as the capture program copies them (copy_path):
// "/proc/version" of "version\0proc\0/\0\0". A whole path ends with an
// empty name after its root; a path cut before its root starts with
// "…/". The root of a file in no mount tree (a pipe, an anonymous inode)
// is not "/": its name is shown as it is. It returns false for nothing
// to show.
func joinPath(b []byte) (string, bool) {
	names := strings.Split(string(b), "\x00")
	names = names[:len(names)-1] // after the last NUL
	whole := len(names) > 0 && names[len(names)-1] == ""
	if whole {
		names = names[:len(names)-1]
	}
	if len(names) == 0 {
		return "", false
	}
	slices.Reverse(names)
	switch {
	case !whole:
		return "…/" + strings.Join(names, "/"), true
	case names[0] == "/":
		return "/" + strings.Join(names[1:], "/"), true
	case len(names) == 1 && names[0] == "":
		return "", false
	}
	return strings.Join(names, "/"), true
}
