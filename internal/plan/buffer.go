// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// DefaultBufferBudget is the bytes copied of a sized buffer by default.
const DefaultBufferBudget = 64

// BufferPairs are the parameter names that make a sized buffer: a char *,
// void *, u8 * or unsigned char * argument named as the key, with an
// integer argument of the same function named as one of the values, is
// captured as that many bytes. The list is documented in docs/buffers.md.
var BufferPairs = map[string][]string{
	"buf":   {"count", "len", "size", "buflen", "nbytes", "length"},
	"ubuf":  {"count", "len", "size", "usize"},
	"data":  {"len", "size", "count", "data_len", "datalen", "length"},
	"ptr":   {"size", "len", "count"},
	"src":   {"len", "size", "count", "n"},
	"dst":   {"len", "size", "count", "n"},
	"from":  {"len", "size", "n"},
	"to":    {"len", "size", "n"},
	"value": {"size", "len", "value_len"},
	"mem":   {"size", "len"},
	"kbuf":  {"count", "len", "size"},
	"page":  {"count", "len", "size"},
	"key":   {"keylen", "key_len"},
}

// SizedBuffer tells how a sized buffer's length is known.
type SizedBuffer struct {
	// LenArg is the index of the argument holding the buffer's size.
	LenArg int
	// AtExit is set for a buffer the function fills (its pointer is not
	// to const): it is copied when the function returns.
	AtExit bool
	// RetLen is set when the return value is the length filled (a
	// signed integer, such as a read's): the bytes copied are the
	// return value, at most the size argument, and none on an error.
	RetLen bool
}

// BufferSpec names a sized buffer explicitly: argument Arg of function
// Func holds SizeArg bytes.
type BufferSpec struct {
	Func, Arg, SizeArg string
}

// ParseBufferSpec parses FUNC:ARG=SIZEARG.
func ParseBufferSpec(s string) (BufferSpec, error) {
	fn, rest, ok1 := strings.Cut(s, ":")
	arg, size, ok2 := strings.Cut(rest, "=")
	if !ok1 || !ok2 || fn == "" || arg == "" || size == "" {
		return BufferSpec{}, fmt.Errorf("%q is not FUNC:ARG=SIZEARG", s)
	}
	return BufferSpec{Func: fn, Arg: arg, SizeArg: size}, nil
}

// isBytePointer says whether t points to char, signed or unsigned, u8
// or void, and whether what it points to is const.
func isBytePointer(t btf.Type) (ok, isConst bool) {
	p, isPtr := btf.UnderlyingType(t).(*btf.Pointer)
	if !isPtr {
		return false, false
	}
	target := p.Target
	for range 16 {
		switch v := target.(type) {
		case *btf.Const:
			isConst = true
			target = v.Type
			continue
		case *btf.Volatile:
			target = v.Type
			continue
		case *btf.TypeTag:
			target = v.Type
			continue
		case *btf.Typedef:
			target = v.Type
			continue
		case *btf.Restrict:
			target = v.Type
			continue
		case *btf.Void:
			return true, isConst
		case *btf.Int:
			return v.Size == 1, isConst
		default:
			return false, false
		}
	}
	return false, false
}

// pairBuffers finds the sized buffers of p's arguments, by BufferPairs
// or by the specs naming p's function, and gives them class Buffer and
// budget budget. It fails on a spec whose names p lacks.
func pairBuffers(p *Plan, specs []BufferSpec, budget int) error {
	index := func(name string) int {
		for i, a := range p.Args {
			if a.Name == name {
				return i
			}
		}
		return -1
	}
	isLen := func(i int) bool {
		return i >= 0 && (p.Args[i].Class == Signed || p.Args[i].Class == Unsigned)
	}
	set := func(i, n int) {
		a := &p.Args[i]
		_, isConst := isBytePointer(a.Type)
		a.Class, a.Budget = Buffer, budget
		a.Buffer = &SizedBuffer{LenArg: n, AtExit: !isConst}
		a.Buffer.RetLen = a.Buffer.AtExit && p.Ret.Class == Signed
	}
	for _, s := range specs {
		if s.Func != p.Func.Name {
			continue
		}
		i, n := index(s.Arg), index(s.SizeArg)
		if ok, _ := isBytePointer(argType(p, i)); !ok {
			return fmt.Errorf("--buf %s:%s=%s: no char, u8 or void pointer argument %s", s.Func, s.Arg, s.SizeArg, s.Arg)
		}
		if !isLen(n) {
			return fmt.Errorf("--buf %s:%s=%s: no integer argument %s", s.Func, s.Arg, s.SizeArg, s.SizeArg)
		}
		set(i, n)
	}
	for i, a := range p.Args {
		if a.Class == Buffer {
			continue
		}
		if ok, _ := isBytePointer(a.Type); !ok {
			continue
		}
		for _, name := range BufferPairs[a.Name] {
			if n := index(name); isLen(n) {
				set(i, n)
				break
			}
		}
	}
	return nil
}

func argType(p *Plan, i int) btf.Type {
	if i < 0 {
		return nil
	}
	return p.Args[i].Type
}
