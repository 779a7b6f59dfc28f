// SPDX-License-Identifier: Apache-2.0

package kernel

import "strings"

// nameSet is the set of names LoadNames catalogues; a nil set keeps every
// name. A symbol is kept when its name, or its part before a compiler
// suffix ("foo" of "foo.isra.0"), is in the set.
//
// It is asked about every symbol of the kernel's files (some 400,000
// names), so it turns most names away by their length and first byte
// before hashing them: hashing every name was a sixth of the catalogue's
// start in the emulated test bed guests.
type nameSet struct {
	// kept maps the names to true, and the names of the prototypes of
	// suffixed names ("foo" for "foo.llvm.123") to false, unless kept.
	kept  map[string]bool
	lens  [256]bool // lengths of the keys of kept, 255 for any longer
	first [256]bool // first bytes of the keys of kept
}

func newNameSet(names []string) *nameSet {
	s := &nameSet{kept: make(map[string]bool, len(names))}
	for _, n := range names {
		if n != "" {
			s.add(n, true)
		}
	}
	for _, n := range names {
		if base, _, cut := strings.Cut(n, "."); cut && base != "" && !s.kept[base] {
			s.add(base, false)
		}
	}
	return s
}

func (s *nameSet) add(name string, kept bool) {
	s.kept[name] = kept
	s.lens[min(len(name), 255)] = true
	s.first[name[0]] = true
}

// has says whether the symbol called name is kept.
func (s *nameSet) has(name string) bool {
	if s == nil {
		return true
	}
	if s.maybe(name) && s.kept[name] {
		return true
	}
	base, _, cut := strings.Cut(name, ".")
	return cut && s.maybe(base) && s.kept[base]
}

// maybe turns away most names that are no key of kept, without hashing.
func (s *nameSet) maybe(name string) bool {
	return name != "" && s.first[name[0]] && s.lens[min(len(name), 255)]
}

// needsProto says whether the BTF function called name, in a file's bytes,
// is the prototype of a kept symbol (BTF names have no suffix). It does
// not copy the name.
func (s *nameSet) needsProto(name []byte) bool {
	if s == nil {
		return true
	}
	if len(name) == 0 || !s.first[name[0]] || !s.lens[min(len(name), 255)] {
		return false
	}
	_, ok := s.kept[string(name)]
	return ok
}
