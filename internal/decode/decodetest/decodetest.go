// SPDX-License-Identifier: Apache-2.0

// Package decodetest provides the BTF fixture and helpers the decode and
// render tests use to build realistic captured bytes from real kernel types.
package decodetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// Spec loads the committed BTF fixture (see ../testdata/mkfixture).
func Spec() (*btf.Spec, error) {
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "testdata", "kernel.btf"))
	if err != nil {
		return nil, fmt.Errorf("read fixture: %w", err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("load fixture: %w", err)
	}
	return spec, nil
}

// Func returns the prototype of the function name in spec.
func Func(spec *btf.Spec, name string) (*btf.FuncProto, error) {
	var fn *btf.Func
	if err := spec.TypeByName(name, &fn); err != nil {
		return nil, fmt.Errorf("function %s: %w", name, err)
	}
	proto, ok := fn.Type.(*btf.FuncProto)
	if !ok {
		return nil, fmt.Errorf("function %s has no prototype", name)
	}
	return proto, nil
}

// Pointee returns the type an argument of proto points to.
func Pointee(proto *btf.FuncProto, arg string) (btf.Type, error) {
	for _, p := range proto.Params {
		if p.Name != arg {
			continue
		}
		if ptr, ok := btf.UnderlyingType(p.Type).(*btf.Pointer); ok {
			return ptr.Target, nil
		}
		return nil, fmt.Errorf("argument %s is not a pointer", arg)
	}
	return nil, fmt.Errorf("no argument %s", arg)
}

// Put stores x, little-endian, into buf at the member of t named by a dotted
// path (anonymous members are searched through), using the member's size.
// Bitfields are not supported.
func Put(buf []byte, t btf.Type, path string, x uint64) error {
	off, size, err := Locate(t, path)
	if err != nil {
		return err
	}
	if off+size > len(buf) {
		return fmt.Errorf("%s: offset %d size %d beyond buffer of %d", path, off, size, len(buf))
	}
	switch size {
	case 1:
		buf[off] = byte(x)
	case 2:
		binary.LittleEndian.PutUint16(buf[off:], uint16(x))
	case 4:
		binary.LittleEndian.PutUint32(buf[off:], uint32(x))
	case 8:
		binary.LittleEndian.PutUint64(buf[off:], x)
	default:
		return fmt.Errorf("%s: size %d is not a scalar", path, size)
	}
	return nil
}

// PutBytes copies b into buf at the member of t named by path.
func PutBytes(buf []byte, t btf.Type, path string, b []byte) error {
	off, size, err := Locate(t, path)
	if err != nil {
		return err
	}
	if len(b) > size || off+len(b) > len(buf) {
		return fmt.Errorf("%s: %d bytes do not fit", path, len(b))
	}
	copy(buf[off:], b)
	return nil
}

// Locate returns the byte offset and size of the member of t named by a
// dotted path.
func Locate(t btf.Type, path string) (off, size int, err error) {
	for name := range strings.SplitSeq(path, ".") {
		m, moff, ok := find(btf.UnderlyingType(t), name)
		if !ok {
			return 0, 0, fmt.Errorf("%s: no member %s in %v", path, name, t)
		}
		off += moff
		t = m.Type
	}
	size, err = btf.Sizeof(t)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return off, size, nil
}

// find looks for a member by name, through anonymous members.
func find(t btf.Type, name string) (btf.Member, int, bool) {
	var members []btf.Member
	switch t := t.(type) {
	case *btf.Struct:
		members = t.Members
	case *btf.Union:
		members = t.Members
	}
	for _, m := range members {
		if m.Name == name {
			return m, int(m.Offset / 8), true
		}
		if m.Name == "" {
			if sub, off, ok := find(btf.UnderlyingType(m.Type), name); ok {
				return sub, int(m.Offset/8) + off, true
			}
		}
	}
	return btf.Member{}, 0, false
}
