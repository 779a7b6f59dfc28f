// SPDX-License-Identifier: Apache-2.0

package call

import (
	"fmt"
	"math"
)

// Kind says what a Value holds and which of its fields are meaningful.
type Kind uint8

// The kinds of Value.
const (
	// KindNone is the zero Value: nothing, such as the result of a void function.
	KindNone Kind = iota
	// KindUnknown is a value whose bytes were not captured; it is shown as "?".
	KindUnknown
	// KindInt is a signed integer; Int returns it.
	KindInt
	// KindUint is an unsigned integer; Uint returns it.
	KindUint
	// KindBool is a boolean; Bool returns it.
	KindBool
	// KindFloat is a floating point number; Float returns it.
	KindFloat
	// KindEnum is an enumerator: Str holds its name (or names joined by '|'
	// for flag-style enums, or "" if the value has no name) and Uint its value.
	KindEnum
	// KindString is text, in Str.
	KindString
	// KindBytes is raw memory without a usable type, in Str.
	KindBytes
	// KindPointer is an address, in Uint; 0 is NULL. Str holds the kernel
	// symbol it falls in, if any, and Off the offset into that symbol.
	KindPointer
	// KindErrno is a negative error number returned by a function: Int holds
	// it and Str the errno name without the sign, "" if it has none.
	KindErrno
	// KindStruct is a struct or union; Fields holds the members shown.
	// Str, if set, is the one string a well-known struct reads as, made
	// of its members (a task's "comm[pid]", a dentry's or a network
	// device's name): text shows it in place of the members.
	KindStruct
	// KindArray is an array; Fields holds the elements shown.
	KindArray
)

// kindNames are the names String gives the kinds.
var kindNames = [...]string{
	KindNone:    "none",
	KindUnknown: "unknown",
	KindInt:     "int",
	KindUint:    "uint",
	KindBool:    "bool",
	KindFloat:   "float",
	KindEnum:    "enum",
	KindString:  "string",
	KindBytes:   "bytes",
	KindPointer: "pointer",
	KindErrno:   "errno",
	KindStruct:  "struct",
	KindArray:   "array",
}

// String returns the kind's name in lower case, as "int" for KindInt.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// ValueFlags qualify a Value.
type ValueFlags uint8

const (
	// Truncated marks a value whose captured bytes ended before the value did;
	// what could be decoded is shown and the rest is not.
	Truncated ValueFlags = 1 << iota
	// Elided marks a struct, union or array nested deeper than the
	// decoder's depth (--depth): its content is not shown.
	Elided
	// Hex marks an integer that reads best in hexadecimal: a member named
	// like flags, a mask or a mode.
	Hex
	// Cut marks a struct behind a pointer that --depth would have
	// captured, left out by the per-call byte budget: it has no Fields.
	Cut
	// Buffer marks a KindString or KindBytes value that holds the bytes
	// of a sized buffer (docs/buffers.md, and --show's buf()): the data a
	// call reads or writes, rather than a NUL-terminated string.
	Buffer
)

// Value is a decoded value: a scalar, a string, a pointer or a tree of
// struct members and array elements.
type Value struct {
	Kind  Kind
	Flags ValueFlags
	// More counts the struct members or array elements not shown in Fields
	// (cut by the decoder's default view).
	More int32
	// Name is the argument or member name; "" for array elements.
	Name string
	// Str holds text for the kinds that have some (see Kind).
	Str string
	// Bits holds the scalar: integers, the enumerator, the address, the
	// boolean (0 or 1) and the IEEE 754 bits of a float (as float64).
	Bits uint64
	// Off is a pointer's offset from the symbol in Str.
	Off uint64
	// Fields holds struct members and array elements.
	Fields []Value
}

// Int returns the value of a KindInt or KindErrno Value.
func (v *Value) Int() int64 { return int64(v.Bits) }

// Uint returns the value of a KindUint, KindEnum or KindPointer Value.
func (v *Value) Uint() uint64 { return v.Bits }

// Bool returns the value of a KindBool Value.
func (v *Value) Bool() bool { return v.Bits != 0 }

// Float returns the value of a KindFloat Value.
func (v *Value) Float() float64 { return math.Float64frombits(v.Bits) }

// IsTruncated reports whether the captured bytes ended inside the value.
func (v *Value) IsTruncated() bool { return v.Flags&Truncated != 0 }

// IsHex reports whether an integer reads best in hexadecimal.
func (v *Value) IsHex() bool { return v.Flags&Hex != 0 }

// IsElided reports whether the value was nested too deep to be shown.
func (v *Value) IsElided() bool { return v.Flags&Elided != 0 }

// IsCut reports whether the per-call byte budget left the value out.
func (v *Value) IsCut() bool { return v.Flags&Cut != 0 }

// IsBuffer reports whether the value holds the bytes of a sized buffer.
func (v *Value) IsBuffer() bool { return v.Flags&Buffer != 0 }
