// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"
)

// btfStrings is what the split BTF of a module needs of the BTF it extends:
// the first type ID it may use and the strings its name offsets can point
// into.
type btfStrings struct {
	nextID  btf.TypeID
	strings []byte
}

// BTF kinds whose header is followed by data, and the size of that data
// (per member for the kinds with a vlen). See the kernel's
// Documentation/bpf/btf.rst.
const (
	kindInt       = 1
	kindArray     = 3
	kindStruct    = 4
	kindUnion     = 5
	kindEnum      = 6
	kindTypedef   = 8
	kindFunc      = 12
	kindFuncProto = 13
	kindVar       = 14
	kindDatasec   = 15
	kindDeclTag   = 17
	kindEnum64    = 19
)

// btfFuncs are the functions of one BTF object: names[i] is the name of
// the FUNC types ids[i] (several for static functions of several files),
// index finds i by name.
type btfFuncs struct {
	names []string
	ids   [][]btf.TypeID
	index map[string]int32
	// tracepoints finds the btf_trace_EVENT typedef of each BTF-typed
	// tracepoint by its event name.
	tracepoints map[string]btf.TypeID
}

// btfTracePrefix starts the name of the typedef the kernel declares for
// each tracepoint: a pointer to the prototype its programs are called
// with.
const btfTracePrefix = "btf_trace_"

// scanFuncs indexes the FUNC types of one raw BTF object by name, reading
// only the type headers, and only those keep needs (the prototypes of the names it keeps). base is nil for
// vmlinux.
//
// Written by hand because cilium/ebpf tells a type's kind only by inflating
// it together with every type it refers to: finding the functions through
// Spec.All inflated all of vmlinux and was four fifths of the catalogue's
// load time. The functions a trace uses are inflated later, one by one
// (Function.Proto).
func scanFuncs(raw []byte, base *btfStrings, keep *nameSet) (btfFuncs, btfStrings, error) {
	var funcs btfFuncs
	if len(raw) < 24 {
		return funcs, btfStrings{}, errors.New("BTF header truncated")
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if binary.BigEndian.Uint16(raw) == 0xeb9f {
		bo = binary.BigEndian
	} else if bo.Uint16(raw) != 0xeb9f {
		return funcs, btfStrings{}, errors.New("not BTF: bad magic")
	}
	hdrLen := uint64(bo.Uint32(raw[4:]))
	typeOff, typeLen := hdrLen+uint64(bo.Uint32(raw[8:])), uint64(bo.Uint32(raw[12:]))
	strOff, strLen := hdrLen+uint64(bo.Uint32(raw[16:])), uint64(bo.Uint32(raw[20:]))
	if typeOff+typeLen > uint64(len(raw)) || strOff+strLen > uint64(len(raw)) {
		return funcs, btfStrings{}, errors.New("BTF sections out of bounds")
	}
	types, strs := raw[typeOff:typeOff+typeLen], raw[strOff:strOff+strLen]

	out := btfStrings{nextID: 1, strings: strs}
	var baseStrs []byte
	if base != nil {
		out.nextID, baseStrs = base.nextID, base.strings
	}
	name := func(off uint32) []byte {
		s := strs
		if base != nil {
			if int(off) < len(baseStrs) {
				s = baseStrs
			} else {
				off -= uint32(len(baseStrs))
			}
		}
		if int(off) >= len(s) {
			return nil
		}
		end := bytes.IndexByte(s[off:], 0)
		if end < 0 {
			return nil
		}
		return s[off : int(off)+end]
	}

	funcs.index = make(map[string]int32, 1<<12)
	funcs.tracepoints = map[string]btf.TypeID{}
	for off := 0; off < len(types); out.nextID++ {
		if off+12 > len(types) {
			return funcs, btfStrings{}, fmt.Errorf("BTF type %d truncated", out.nextID)
		}
		nameOff, info := bo.Uint32(types[off:]), bo.Uint32(types[off+4:])
		kind, vlen := (info>>24)&0x1f, int(info&0xffff)
		if kind == kindFunc && keep.needsProto(name(nameOff)) {
			n := string(name(nameOff))
			i, ok := funcs.index[n]
			if !ok {
				i = int32(len(funcs.names))
				funcs.index[n] = i
				funcs.names = append(funcs.names, n)
				funcs.ids = append(funcs.ids, nil)
			}
			funcs.ids[i] = append(funcs.ids[i], out.nextID)
		}
		if kind == kindTypedef {
			if event, ok := bytes.CutPrefix(name(nameOff), []byte(btfTracePrefix)); ok {
				funcs.tracepoints[string(event)] = out.nextID
			}
		}
		off += 12
		switch kind {
		case kindInt, kindVar, kindDeclTag:
			off += 4
		case kindArray:
			off += 12
		case kindStruct, kindUnion, kindDatasec, kindEnum64:
			off += 12 * vlen
		case kindEnum, kindFuncProto:
			off += 8 * vlen
		}
	}
	return funcs, out, nil
}
