// SPDX-License-Identifier: Apache-2.0

// Package decode turns the raw bytes the kernel captures for a traced call
// into typed values, using the kernel's BTF.
//
// The kernel side hands over, per argument, its 8-byte slot(s) and, for
// pointer arguments, up to a budget of bytes copied from behind the pointer
// (a NUL-terminated string for char pointers). A Decoder turns these into
// Value trees: integers, booleans, enumerators by name, strings, symbolised
// pointers, and structs, unions and arrays cut to a readable size.
//
// trawl supports little-endian targets only (x86-64, arm64): raw bytes and
// bitfield offsets are read as little-endian.
package decode

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
)

// Symbolizer maps kernel addresses to symbols; the kernel package provides
// one backed by kallsyms. Symbolize must return ok=false for addresses that
// do not fall inside a known symbol (heap, stack, user memory), so that they
// are shown as plain hex rather than as a far offset from an unrelated
// symbol. It is called from the decoding goroutine only.
type Symbolizer interface {
	Symbolize(addr uint64) (name string, off uint64, ok bool)
}

// Options control how much of a value is shown. The zero value gives the
// defaults of the command.
type Options struct {
	// Depth is how many levels of nested structs, unions and arrays are
	// shown; deeper ones are marked Elided. 0 means DefaultDepth.
	Depth int
	// MaxBytes is the longest string or byte run shown; longer ones are cut
	// and More counts the bytes not shown. 0 means DefaultMaxBytes.
	MaxBytes int
	// ArrayLen is how many array elements are shown; More counts the rest.
	// 0 means DefaultArrayLen.
	ArrayLen int
	// Fields is how many struct members the default view shows; More counts
	// the non-zero ones left out. 0 means DefaultFields.
	Fields int
	// Full shows every member in declaration order, zero or not, with every
	// union alternative, and cuts no array or string. Depth still applies.
	Full bool
}

// Defaults for Options.
const (
	DefaultDepth    = 2
	DefaultMaxBytes = 64
	DefaultArrayLen = 8
	DefaultFields   = 8
)

// Raw is one argument as the kernel captured it.
type Raw struct {
	// Slots holds the argument's register or stack slot; Slots[1] is used
	// only by structs of 9 to 16 bytes passed by value.
	Slots [2]uint64
	// Data holds the bytes copied from behind a pointer argument, nil if
	// none were. It may be shorter than the pointed-to type: the value is
	// then marked Truncated. For char pointers it holds the string and its
	// terminating NUL; a string without NUL was cut by the budget.
	Data []byte
	// Windows hold members of the struct a pointer argument points to
	// past the end of Data, for its view.
	Windows []Window
}

// Window is a run of bytes of a struct, past those captured from its
// start: a member its view shows.
type Window struct {
	// Off is the run's byte offset in the struct.
	Off int
	// Data are the run's bytes.
	Data []byte
}

// A Decoder decodes values. It caches a layout per struct type, so one
// Decoder should live as long as the BTF it decodes; it is not safe for
// concurrent use.
type Decoder struct {
	opts    Options
	sym     Symbolizer
	layouts map[btf.Type]*layout
	// last is the layout looked up last, and lastType its type: a trace
	// decodes the same few structs over and over.
	last     *layout
	lastType btf.Type
	pointees map[*byte]Pointee
	windows  []Window // of the argument being decoded
	// block is what is left of the block the members of structs and
	// arrays are handed out from (fields).
	block []call.Value
}

// blockLen is how many values a block holds: the members of dozens of
// calls' structs, allocated at once.
const blockLen = 512

// fields returns an empty slice with room for n values, never handed out
// before: decoded values stay as they are while later calls are decoded,
// at one allocation per block rather than one per struct. Appending past
// n allocates anew.
func (d *Decoder) fields(n int) []call.Value {
	if n == 0 || n > blockLen/4 {
		return make([]call.Value, 0, n)
	}
	if n > len(d.block) {
		d.block = make([]call.Value, blockLen)
	}
	f := d.block[:0:n]
	d.block = d.block[n:]
	return f
}

// Pointee is the memory captured behind a pointer that captured memory
// holds (trawl's --depth), or the mark that it was cut.
type Pointee struct {
	// Data are the bytes captured; they may be fewer than the type's.
	Data []byte
	// Cut is set when the per-call byte budget left the memory out.
	Cut bool
	// Packet marks the bytes of a packet from its network header, held
	// for an sk_buff's head pointer: its view shows their addresses,
	// ports and protocol.
	Packet bool
	// String marks Data as a NUL-terminated string, read up to its NUL
	// or its budget: the pointer is shown as the string.
	String bool
	// Path, held for the mount pointer of a struct path (a struct file's
	// f_path), are the names of its dentries from the last up, each
	// NUL-terminated; the struct shows them as its path.
	Path []byte
}

// Pointees tells d where the pointers are, in the captured memory it is
// given, whose targets were captured too: m maps the first byte of such a
// pointer to what is behind it. The caller keeps m up to date for each
// record it decodes; a pointer found in m is shown as what it points to
// (a cut one as an empty struct marked call.Cut).
func (d *Decoder) Pointees(m map[*byte]Pointee) { d.pointees = m }

// NewDecoder returns a Decoder. sym may be nil: pointers are then shown as hex.
func NewDecoder(opts Options, sym Symbolizer) *Decoder {
	if opts.Depth <= 0 {
		opts.Depth = DefaultDepth
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.ArrayLen <= 0 {
		opts.ArrayLen = DefaultArrayLen
	}
	if opts.Fields <= 0 {
		opts.Fields = DefaultFields
	}
	return &Decoder{opts: opts, sym: sym, layouts: map[btf.Type]*layout{}}
}

// Value decodes a value of type t held in memory as raw. raw may be shorter
// than t: what is there is shown and the value is marked Truncated.
func (d *Decoder) Value(t btf.Type, raw []byte) call.Value {
	u, be := resolve(t)
	return d.value(u, be, raw, 0)
}

// Arg decodes the argument name of type t from what the kernel captured.
// A non-NULL pointer with captured Data is shown as the value it points to.
func (d *Decoder) Arg(name string, t btf.Type, r Raw) call.Value {
	u, be := resolve(t)
	var v call.Value
	if p, ok := u.(*btf.Pointer); ok && r.Data != nil && r.Slots[0] != 0 {
		d.windows = r.Windows
		v = d.pointee(p.Target, r.Data)
		d.windows = nil
	} else {
		var buf [16]byte
		binary.LittleEndian.PutUint64(buf[:8], r.Slots[0])
		binary.LittleEndian.PutUint64(buf[8:], r.Slots[1])
		v = d.value(u, be, buf[:], 0)
	}
	v.Name = name
	return v
}

// Ret decodes a return value of type t from its register. Negative error
// numbers returned as signed integers or as error pointers (ERR_PTR) become
// KindErrno. A void type gives KindNone.
func (d *Decoder) Ret(t btf.Type, raw uint64) call.Value {
	u, _ := resolve(t)
	switch u := u.(type) {
	case *btf.Void:
		return call.Value{}
	case *btf.Int:
		if u.Encoding == btf.Signed && u.Size <= 8 {
			if x := signExtend(raw, 8*uint(u.Size)); isErrno(x) {
				return errnoValue(x)
			}
		}
	case *btf.Pointer:
		if isErrno(int64(raw)) {
			return errnoValue(int64(raw))
		}
	}
	return d.Arg("", t, Raw{Slots: [2]uint64{raw}})
}

// GuessedRet decodes the return register of a function whose return type
// nothing tells: an error number when its lower half, as a signed int, is
// from -4095 to -1 (an int return leaves the upper half zero on x86-64
// and arm64, a long or an error pointer sign-extends it), else the
// register as a signed long.
func (d *Decoder) GuessedRet(raw uint64) call.Value {
	if x := signExtend(raw, 32); isErrno(x) {
		return errnoValue(x)
	}
	return call.Value{Kind: call.KindInt, Bits: raw}
}

// maxErrno is the largest error number the kernel returns (MAX_ERRNO).
const maxErrno = 4095

func isErrno(x int64) bool { return x < 0 && x >= -maxErrno }

func errnoValue(x int64) call.Value {
	return call.Value{Kind: call.KindErrno, Bits: uint64(x), Str: ErrnoName(-x)}
}

// resolve skips typedefs and qualifiers. be reports a big-endian typedef
// (__be16, __be32, __be64) on the way: such integers are shown in host
// order. A nil type is Void.
func resolve(t btf.Type) (u btf.Type, be bool) {
	for range 64 { // bounds malformed, cyclic BTF
		switch v := t.(type) {
		case nil:
			return (*btf.Void)(nil), be
		case *btf.Typedef:
			be = be || strings.HasPrefix(v.Name, "__be")
			t = v.Type
		case *btf.Const:
			t = v.Type
		case *btf.Volatile:
			t = v.Type
		case *btf.Restrict:
			t = v.Type
		case *btf.TypeTag:
			t = v.Type
		default:
			return t, be
		}
	}
	return (*btf.Void)(nil), be
}

// value decodes a value of resolved type u from raw at nesting depth depth.
func (d *Decoder) value(u btf.Type, be bool, raw []byte, depth int) call.Value {
	switch u := u.(type) {
	case *btf.Int, *btf.Enum, *btf.Float, *btf.Pointer:
		size := scalarSize(u)
		x, ok := readUint(raw, size)
		if !ok {
			return call.Value{Kind: call.KindUnknown, Flags: call.Truncated}
		}
		if be && size > 1 {
			x = swap(x, size)
		}
		if p, ok := u.(*btf.Pointer); ok && len(d.pointees) > 0 && x != 0 {
			if pt, ok := d.pointees[&raw[0]]; ok && !pt.Packet && (pt.Data != nil || pt.Cut) {
				return d.deep(p, pt, depth)
			}
		}
		return d.scalar(u, x, 8*uint(size))
	case *btf.Struct, *btf.Union:
		return d.composite(u, raw, depth)
	case *btf.Array:
		return d.array(u, raw, depth)
	}
	return d.bytes(raw)
}

// scalarSize returns the size in bytes of a scalar type.
func scalarSize(u btf.Type) int {
	switch u := u.(type) {
	case *btf.Int:
		return int(u.Size)
	case *btf.Enum:
		return int(u.Size)
	case *btf.Float:
		return int(u.Size)
	}
	return 8 // pointers: both supported targets are 64-bit
}

// scalar makes a Value of resolved scalar type u from its width low bits x.
func (d *Decoder) scalar(u btf.Type, x uint64, width uint) call.Value {
	switch u := u.(type) {
	case *btf.Int:
		switch {
		case u.Encoding == btf.Bool:
			return call.Value{Kind: call.KindBool, Bits: b2u(x != 0)}
		case u.Encoding == btf.Signed:
			return call.Value{Kind: call.KindInt, Bits: uint64(signExtend(x, width))}
		}
		return call.Value{Kind: call.KindUint, Bits: x}
	case *btf.Enum:
		if u.Signed {
			x = uint64(signExtend(x, width))
		}
		return call.Value{Kind: call.KindEnum, Bits: x, Str: enumName(u, x)}
	case *btf.Float:
		if width == 32 {
			return call.Value{Kind: call.KindFloat, Bits: math.Float64bits(float64(math.Float32frombits(uint32(x))))}
		}
		return call.Value{Kind: call.KindFloat, Bits: x}
	}
	return d.pointer(x)
}

// pointer makes a Value of an address, symbolised if it can be.
func (d *Decoder) pointer(addr uint64) call.Value {
	v := call.Value{Kind: call.KindPointer, Bits: addr}
	if addr != 0 && d.sym != nil {
		if name, off, ok := d.sym.Symbolize(addr); ok {
			v.Str, v.Off = name, off
		}
	}
	return v
}

// pointee decodes the captured bytes behind a pointer to target.
func (d *Decoder) pointee(target btf.Type, data []byte) call.Value {
	u, be := resolve(target)
	switch u := u.(type) {
	case *btf.Int:
		if isChar(u) {
			return d.cstring(data, true)
		}
	case *btf.Void, *btf.Fwd, *btf.FuncProto:
		return d.bytes(data)
	}
	return d.value(u, be, data, 0)
}

// deep decodes the captured target of pointer p, at depth depth.
func (d *Decoder) deep(p *btf.Pointer, pt Pointee, depth int) call.Value {
	if pt.Cut {
		return call.Value{Kind: call.KindStruct, Flags: call.Cut}
	}
	if pt.String {
		return d.cstring(pt.Data, true)
	}
	u, be := resolve(p.Target)
	return d.value(u, be, pt.Data, depth)
}

// CString decodes a NUL-terminated string read into b, cut by b's end
// if it has no NUL.
func (d *Decoder) CString(b []byte) call.Value { return d.cstring(b, true) }

// cstring makes a string Value of the bytes up to the first NUL. Without a
// NUL the string is marked Truncated if open says it may go on.
func (d *Decoder) cstring(b []byte, open bool) call.Value {
	v := call.Value{Kind: call.KindString}
	if i := indexNUL(b); i >= 0 {
		b = b[:i]
	} else if open {
		v.Flags |= call.Truncated
	}
	if !d.opts.Full && len(b) > d.opts.MaxBytes {
		v.More = int32(len(b) - d.opts.MaxBytes)
		b = b[:d.opts.MaxBytes]
	}
	v.Str = string(b)
	return v
}

// Buffer decodes the sized buffer name: data are its first bytes, of n
// in all. Printable text is a string of exactly those bytes, anything
// else raw bytes, either marked call.Buffer; More counts the bytes not
// captured or not shown.
func (d *Decoder) Buffer(name string, data []byte, n uint64) call.Value {
	data = data[:min(uint64(len(data)), n)]
	v := call.Value{Kind: call.KindBytes, Flags: call.Buffer, Name: name}
	if printable(data) {
		v.Kind = call.KindString
	}
	if !d.opts.Full && len(data) > d.opts.MaxBytes {
		data = data[:d.opts.MaxBytes]
	}
	v.Str = string(data)
	v.More = int32(min(n-uint64(len(data)), math.MaxInt32))
	return v
}

// printable says whether b is UTF-8 text of graphic characters, spaces,
// tabs and line ends.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsGraphic(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

// bytes makes a Value of raw memory, cut to MaxBytes.
func (d *Decoder) bytes(b []byte) call.Value {
	v := call.Value{Kind: call.KindBytes}
	if !d.opts.Full && len(b) > d.opts.MaxBytes {
		v.More = int32(len(b) - d.opts.MaxBytes)
		b = b[:d.opts.MaxBytes]
	}
	v.Str = string(b)
	return v
}

// array decodes an array; char arrays become strings.
func (d *Decoder) array(a *btf.Array, raw []byte, depth int) call.Value {
	eu, be := resolve(a.Type)
	if i, ok := eu.(*btf.Int); ok && isChar(i) {
		n := min(int(a.Nelems), len(raw))
		return d.cstring(raw[:n], n < int(a.Nelems))
	}
	v := call.Value{Kind: call.KindArray}
	if depth >= d.opts.Depth {
		v.Flags |= call.Elided
		return v
	}
	size, err := btf.Sizeof(eu)
	if err != nil || size <= 0 {
		return v
	}
	n := int(a.Nelems)
	show := n
	if !d.opts.Full {
		show = min(n, d.opts.ArrayLen)
	}
	have := len(raw) / size
	if have < show {
		show = have
		v.Flags |= call.Truncated
	}
	v.Fields = d.fields(show)[:show]
	for i := range show {
		v.Fields[i] = d.value(eu, be, raw[i*size:(i+1)*size], depth+1)
	}
	v.More = int32(n - show)
	return v
}

// composite decodes a struct or union with its layout.
func (d *Decoder) composite(t btf.Type, raw []byte, depth int) call.Value {
	if v, ok := sockaddr(t, raw); ok {
		return v
	}
	v := call.Value{Kind: call.KindStruct}
	if depth >= d.opts.Depth {
		v.Flags |= call.Elided
		return v
	}
	p := d.layout(t)
	switch {
	case d.opts.Full:
		d.all(&v, p.all, raw, depth)
	case p.view != nil && d.view(&v, p.view, raw, d.windowsAt(depth), depth):
		if p.sock != nil {
			p.sock.withAddrs(&v, raw)
		}
		if p.short != nil {
			v.Str = short(p.short, v.Fields)
		}
	default:
		d.pick(&v, p.pick, raw, depth)
	}
	if p.skb != nil && len(d.pointees) > 0 {
		p.skb.withTuple(&v, raw, d.pointees)
	}
	if p.path >= 0 && len(d.pointees) > 0 {
		withPath(&v, raw, p.path, d.pointees)
	}
	return v
}

// short makes the short form of a struct of view members fields.
func short(form func(map[string]*call.Value) string, fields []call.Value) string {
	m := make(map[string]*call.Value, len(fields))
	for i := range fields {
		m[fields[i].Name] = &fields[i]
	}
	return form(m)
}

// all shows every member; those not captured are KindUnknown.
func (d *Decoder) all(v *call.Value, fields []field, raw []byte, depth int) {
	v.Fields = d.fields(len(fields))[:len(fields)]
	for i := range fields {
		v.Fields[i] = d.member(&fields[i], raw, depth)
		v.Flags |= v.Fields[i].Flags & call.Truncated
	}
}

// pick shows the non-zero members, scalars first, up to Options.Fields.
func (d *Decoder) pick(v *call.Value, fields []field, raw []byte, depth int) {
	for _, composite := range [2]bool{false, true} {
		for i := range fields {
			f := &fields[i]
			if f.composite != composite {
				continue
			}
			switch f.state(raw) {
			case missing:
				v.Flags |= call.Truncated
				continue
			case zero:
				continue
			}
			if len(v.Fields) == d.opts.Fields {
				v.More++
				continue
			}
			if v.Fields == nil {
				v.Fields = d.fields(min(len(fields), d.opts.Fields))
			}
			m := d.member(f, raw, depth)
			v.Flags |= m.Flags & call.Truncated
			v.Fields = append(v.Fields, m)
		}
	}
}

// windowsAt returns the windows of a struct at depth depth: an
// argument's struct's, if it has some.
func (d *Decoder) windowsAt(depth int) []Window {
	if depth == 0 {
		return d.windows
	}
	return nil
}

// view shows the members of a well-known struct's view, zero or not,
// from raw or, past its end, from windows. It shows nothing and returns
// false when none of them was captured (a large struct behind a pointer
// in captured memory), for the generic pick to show what was.
func (d *Decoder) view(v *call.Value, fields []viewField, raw []byte, windows []Window, depth int) bool {
	v.Fields = d.fields(len(fields))
	for i := range fields {
		f, from := fields[i].field, raw
		if f.state(raw) == missing {
			w, ok := windowOf(&f, windows)
			if !ok {
				v.Flags |= call.Truncated
				continue
			}
			f.off -= uint32(8 * w.Off)
			from = w.Data
		}
		m := d.member(&f, from, depth)
		m.Name = fields[i].label
		if names := fields[i].names; names != nil && (m.Kind == call.KindInt || m.Kind == call.KindUint) {
			m.Kind, m.Str = call.KindEnum, names(m.Bits)
		}
		v.Fields = append(v.Fields, m)
	}
	if len(v.Fields) == 0 {
		*v = call.Value{Kind: call.KindStruct}
		return false
	}
	return true
}

// windowOf finds the window that holds the whole of field f, not a
// bitfield.
func windowOf(f *field, windows []Window) (Window, bool) {
	start := int(f.off / 8)
	for _, w := range windows {
		if f.bits == 0 && start >= w.Off && start+int(f.size) <= w.Off+len(w.Data) {
			return w, true
		}
	}
	return Window{}, false
}

// member decodes one member of a struct at depth depth.
func (d *Decoder) member(f *field, raw []byte, depth int) call.Value {
	var v call.Value
	if f.bits != 0 {
		if x, ok := readBits(raw, uint(f.off), uint(f.bits)); ok {
			v = d.scalar(f.typ, x, uint(f.bits))
		} else {
			v = call.Value{Kind: call.KindUnknown, Flags: call.Truncated}
		}
	} else {
		start := int(f.off / 8)
		if start > len(raw) || (start == len(raw) && f.size > 0) {
			v = call.Value{Kind: call.KindUnknown, Flags: call.Truncated}
		} else {
			end := min(start+int(f.size), len(raw))
			v = d.value(f.typ, f.be, raw[start:end], depth+1)
		}
	}
	v.Name = f.name
	if f.hex && (v.Kind == call.KindUint || v.Kind == call.KindInt) {
		v.Flags |= call.Hex
	}
	return v
}

func isChar(i *btf.Int) bool {
	return i.Size == 1 && (i.Encoding == btf.Char || i.Name == "char" || i.Name == "signed char")
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// readUint reads a little-endian unsigned integer of size bytes.
func readUint(raw []byte, size int) (uint64, bool) {
	if len(raw) < size {
		return 0, false
	}
	switch size {
	case 1:
		return uint64(raw[0]), true
	case 2:
		return uint64(binary.LittleEndian.Uint16(raw)), true
	case 4:
		return uint64(binary.LittleEndian.Uint32(raw)), true
	case 8, 16: // 128-bit integers show their low half
		return binary.LittleEndian.Uint64(raw), true
	}
	return 0, false
}

// readBits reads width bits starting at bit off, little-endian bit order.
func readBits(raw []byte, off, width uint) (uint64, bool) {
	start, shift := off/8, off%8
	n := (shift + width + 7) / 8 // at most 9 bytes
	if width == 0 || width > 64 || start+n > uint(len(raw)) {
		return 0, false
	}
	var lo, hi uint64
	for i := range min(n, 8) {
		lo |= uint64(raw[start+i]) << (8 * i)
	}
	if n == 9 {
		hi = uint64(raw[start+8])
	}
	x := lo >> shift
	if shift > 0 {
		x |= hi << (64 - shift)
	}
	if width < 64 {
		x &= 1<<width - 1
	}
	return x, true
}

func signExtend(x uint64, width uint) int64 {
	if width == 0 || width >= 64 {
		return int64(x)
	}
	s := 64 - width
	return int64(x<<s) >> s
}

func swap(x uint64, size int) uint64 {
	switch size {
	case 2:
		return uint64(bits.ReverseBytes16(uint16(x)))
	case 4:
		return uint64(bits.ReverseBytes32(uint32(x)))
	case 8:
		return bits.ReverseBytes64(x)
	}
	return x
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
