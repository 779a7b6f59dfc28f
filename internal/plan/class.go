// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"

	"github.com/cilium/ebpf/btf"
)

// Class tells the BPF program how to read a value. Integers and enums are
// read as Size bytes (the upper bits of a register holding a narrower
// value are undefined and must be dropped).
type Class uint8

// Classes of values.
const (
	Void      Class = iota // no value (return of a void function)
	Signed                 // signed integer of Size 1, 2, 4, 8 or 16 bytes
	Unsigned               // unsigned integer of Size 1, 2, 4, 8 or 16 bytes
	Bool                   // _Bool
	Enum                   // enum of Size bytes
	String                 // char *: copy a NUL-terminated string, up to Budget bytes
	PtrStruct              // pointer to struct or union: copy Budget bytes behind it
	Ptr                    // any other pointer: the address only
	Struct                 // struct or union by value, Size bytes in NumSlots slots
	Float                  // floating point (never in practice: the kernel has no FPU code)
	Buffer                 // char, u8 or void pointer with a size argument: copy that many bytes, up to Budget (see Arg.Buffer)
)

var classNames = [...]string{"void", "signed", "unsigned", "bool", "enum", "string", "ptr-struct", "ptr", "struct", "float", "buffer"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", c)
}

// MarshalText makes classes readable in JSON.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText parses a class written by MarshalText.
func (c *Class) UnmarshalText(text []byte) error {
	for i, name := range classNames {
		if name == string(text) {
			*c = Class(i)
			return nil
		}
	}
	return fmt.Errorf("unknown value class %q", text)
}

// classify returns the class and size of a value of type t.
func classify(t btf.Type) (Class, int, error) {
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		switch {
		case u.Encoding&btf.Bool != 0:
			return Bool, int(u.Size), nil
		case u.Encoding&btf.Signed != 0:
			return Signed, int(u.Size), nil
		}
		return Unsigned, int(u.Size), nil
	case *btf.Enum:
		return Enum, int(u.Size), nil
	case *btf.Pointer:
		target, _ := pointee(t)
		switch target := target.(type) {
		case *btf.Struct, *btf.Union:
			return PtrStruct, 8, nil
		case *btf.Int:
			if target.Name == "char" {
				return String, 8, nil
			}
		}
		return Ptr, 8, nil
	case *btf.Struct:
		return Struct, int(u.Size), nil
	case *btf.Union:
		return Struct, int(u.Size), nil
	case *btf.Float:
		return Float, int(u.Size), nil
	}
	return 0, 0, fmt.Errorf("%s: %w", t, ErrUnsupportedType)
}

// pointee returns the type a pointer points to, with typedefs and
// qualifiers removed ("const char" of "const char *" gives "char").
func pointee(t btf.Type) (btf.Type, bool) {
	p, ok := btf.UnderlyingType(t).(*btf.Pointer)
	if !ok {
		return nil, false
	}
	return btf.UnderlyingType(p.Target), true
}

// alignment returns the alignment of a type in bytes, as the ABIs use it to
// place arguments on the stack.
func alignment(t btf.Type) int {
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		return int(max(1, u.Size))
	case *btf.Enum:
		return int(max(1, u.Size))
	case *btf.Float:
		return int(u.Size)
	case *btf.Array:
		return alignment(u.Type)
	case *btf.Struct:
		return membersAlignment(u.Members)
	case *btf.Union:
		return membersAlignment(u.Members)
	}
	return 8
}

func membersAlignment(members []btf.Member) int {
	a := 1
	for _, m := range members {
		a = max(a, alignment(m.Type))
	}
	return a
}
