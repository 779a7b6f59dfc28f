// SPDX-License-Identifier: Apache-2.0

// Package event reads the capture program's records from the ring buffer
// and turns them into decoded calls. Pairing of entry and exit happens in
// the kernel (a per-task shadow stack), so each record is a whole call, or
// an exit whose entry was missed.
package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"unsafe"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/record"
)

// Record flags, from internal/bpf/capture.h.
const (
	recEntry     = uint8(bpf.CaptureRecFlagREC_ENTRY)
	recTruncated = uint8(bpf.CaptureRecFlagREC_TRUNCATED)
	recOrigin    = uint8(bpf.CaptureRecFlagREC_ORIGIN)
	recTrackEnd  = uint8(bpf.CaptureRecFlagREC_TRACK_END)
)

const headerSize = int(unsafe.Sizeof(bpf.CaptureRecord{}))

// ErrShortRecord is returned for a record smaller than its header says.
var ErrShortRecord = errors.New("short record from the ring buffer")

// Record is one raw record: the header and the captured memory.
type Record struct {
	bpf.CaptureRecord
	Data []byte
}

// Parse splits raw ring buffer bytes into a Record. Data aliases raw.
func Parse(raw []byte) (Record, error) {
	var r Record
	if len(raw) < headerSize {
		return r, fmt.Errorf("%w: %d bytes", ErrShortRecord, len(raw))
	}
	// The header is struct record as the capture program wrote it: in
	// the host's byte order, and laid out as in bpf.CaptureRecord, which
	// bpf2go generates for this architecture from the object's BTF with
	// every padding explicit (structs.HostLayout). It holds no pointers, so
	// copying its bytes over the struct is exact, and much cheaper than
	// binary.Read, which goes field by field through reflection and
	// allocates. TestParse checks the layout against the object.
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r.CaptureRecord)), headerSize), raw)
	r.Data = raw[headerSize:]
	if int(r.DataLen) > len(r.Data) {
		return r, fmt.Errorf("%w: %d data bytes of %d", ErrShortRecord, len(r.Data), r.DataLen)
	}
	r.Data = r.Data[:r.DataLen]
	return r, nil
}

// Decoder turns records into calls. It keeps what a record needs besides
// its bytes, so that decoding one allocates nothing of its own after the
// first record of its function.
type Decoder struct {
	plans []*plan.Plan
	dec   *decode.Decoder
	// caps holds, per plan, its captures in order (capsOf).
	caps [][]record.MemCapture
	// data is the memory captured behind each argument of the current
	// record, nil where none was.
	data [][]byte
	// comms interns task names: a session sees few, each in many records;
	// lastComm is the one looked up last, named lastName (at first, the
	// empty name: "").
	comms    map[[16]int8]string
	lastComm [16]int8
	lastName string
	// shows holds, per plan, the layout of its --show values.
	shows []filter.Block
	// pointees and bytes serve plans with Deep captures: the structs
	// behind pointers in captured memory, and each capture's bytes.
	pointees map[*byte]decode.Pointee
	bytes    [][]byte
	// windows are the current record's Plan.Windows, and argWindows
	// those of the argument being decoded.
	windows    []argWindow
	argWindows []decode.Window
}

// argWindow is a window of the struct argument arg points to.
type argWindow struct {
	arg int
	decode.Window
}

// rawArgs is how many argument registers are shown for a function without
// prototype.
const rawArgs = 6

// maxComms bounds the interned task names; past it, they start anew.
const maxComms = 4096

// NewDecoder decodes records of the given plans (indexed by the record's
// function ID).
func NewDecoder(plans []*plan.Plan, opts decode.Options, sym decode.Symbolizer) *Decoder {
	d := &Decoder{
		plans: plans,
		dec:   decode.NewDecoder(opts, sym),
		caps:  make([][]record.MemCapture, len(plans)),
		comms: map[[16]int8]string{},
	}
	d.pointees = map[*byte]decode.Pointee{}
	d.dec.Pointees(d.pointees)
	return d
}

// capsOf returns the captures of plan id in order, worked out at its
// first record: a session of every function decodes calls of few.
func (d *Decoder) capsOf(id uint32) []record.MemCapture {
	if d.caps[id] == nil {
		d.caps[id] = record.Captures(d.plans[id])
		if d.caps[id] == nil {
			d.caps[id] = []record.MemCapture{} // none, and known
		}
	}
	return d.caps[id]
}

// Call decodes r into c, reusing c's argument slice.
func (d *Decoder) Call(r *Record, c *call.Call) error {
	if int(r.Func) >= len(d.plans) {
		return fmt.Errorf("record for unknown function %d", r.Func)
	}
	p := d.plans[r.Func]
	*c = call.Call{
		TS:     r.EntryTs,
		CPU:    uint32(r.Cpu),
		PID:    r.Tgid,
		TID:    r.Pid,
		Comm:   d.comm(r.Comm),
		Func:   p.Func.Name,
		Module: p.Func.Module,
		Depth:  int(r.Depth),
		Args:   c.Args[:0],
		Show:   c.Show[:0],
		Chain:  r.Chain,
		Track:  r.Track,
	}
	if r.Flags&recOrigin != 0 {
		c.Flags |= call.Origin
	}
	if r.Flags&recTrackEnd != 0 {
		c.Flags |= call.TrackEnd
	}
	if r.Flags&recEntry == 0 {
		c.TS = r.ExitTs
		c.Flags |= call.ExitOnly
	} else {
		c.Duration = r.ExitTs - r.EntryTs
		c.Args = d.args(r, p, c.Args)
		c.Show = d.show(r, c.Show)
	}
	if r.Flags&recTruncated != 0 {
		c.Flags |= call.Missed
	}
	if p.Func.IsTracepoint() {
		c.Flags |= call.Event
		c.Duration = 0 // entered and ended at once
	}
	switch {
	case p.Ret.Guessed:
		c.Ret = d.dec.GuessedRet(r.Ret)
	case p.Ret.Class != plan.Void:
		c.Ret = d.dec.Ret(p.Ret.Type, r.Ret)
	}
	return nil
}

func (d *Decoder) args(r *Record, p *plan.Plan, out []call.Value) []call.Value {
	if len(p.Args) > len(d.data) {
		d.data = make([][]byte, len(p.Args))
	}
	data := d.data[:len(p.Args)]
	clear(data)
	d.windows = d.windows[:0]
	off := 0
	for i, c := range d.capsOf(r.Func) {
		n := int(r.CapLen[i])
		if off+n > len(r.Data) {
			break
		}
		ok := r.CapFailed&(1<<i) == 0
		switch {
		case c.Window > 0 && ok:
			d.windows = append(d.windows, argWindow{c.Arg, decode.Window{Off: p.Windows[c.Window-1].Off, Data: r.Data[off : off+n]}})
		case c.Deep < 0 && !c.Packet && c.Member == 0 && c.Window == 0 && (n > 0 || p.Args[c.Arg].Class == plan.Buffer) && ok:
			data[c.Arg] = r.Data[off : off+n]
		}
		off += n
	}
	if len(p.Deep) > 0 || len(p.Packets) > 0 || len(p.Members) > 0 {
		d.deep(r, p)
	} else if len(d.pointees) > 0 {
		clear(d.pointees)
	}
	for i, a := range p.Args {
		var raw decode.Raw
		for s := 0; s < a.NumSlots && s < 2 && a.Slot+s < len(r.Slots); s++ {
			raw.Slots[s] = r.Slots[a.Slot+s]
		}
		raw.Data = data[i]
		if len(d.windows) > 0 {
			d.argWindows = d.argWindows[:0]
			for _, w := range d.windows {
				if w.arg == i {
					d.argWindows = append(d.argWindows, w.Window)
				}
			}
			raw.Windows = d.argWindows
		}
		name := a.Name
		if name == "" {
			name = argName(i)
		}
		if a.Class == plan.Buffer && raw.Data != nil && raw.Slots[0] != 0 {
			out = append(out, d.dec.Buffer(name, raw.Data, bufferLen(r, p, a.Buffer)))
			continue
		}
		out = append(out, d.dec.Arg(name, a.Type, raw))
	}
	if p.Proto == nil {
		// No prototype: show the raw argument registers.
		for i := range rawArgs {
			out = append(out, call.Value{Kind: call.KindUint, Name: argName(i), Bits: r.Slots[i], Flags: call.Hex})
		}
	}
	return out
}

// deep tells the decoder which pointers in r's captured structs lead to
// structs captured too (Plan.Deep), or cut, where the packets of sk_buff
// arguments are (Plan.Packets), and the strings and paths of their
// members (Plan.Members).
func (d *Decoder) deep(r *Record, p *plan.Plan) {
	clear(d.pointees)
	caps := d.capsOf(r.Func)
	d.bytes = d.bytes[:0]
	off := 0
	for i := range caps {
		n := int(r.CapLen[i])
		if off+n > len(r.Data) {
			break
		}
		var b []byte
		if r.CapFailed&(1<<i) == 0 {
			b = r.Data[off : off+n]
		}
		d.bytes = append(d.bytes, b)
		off += n
	}
	bytesOf := func(c record.MemCapture) []byte {
		if i := slices.Index(caps, c); i >= 0 && i < len(d.bytes) {
			return d.bytes[i]
		}
		return nil
	}
	for i, dp := range p.Deep {
		parent := bytesOf(record.MemCapture{Arg: dp.Arg, Deep: dp.Parent})
		if len(parent) < dp.Off+8 {
			continue
		}
		if dp.Cut {
			d.pointees[&parent[dp.Off]] = decode.Pointee{Cut: true}
		} else if b := bytesOf(record.MemCapture{Arg: dp.Arg, Deep: i}); b != nil {
			d.pointees[&parent[dp.Off]] = decode.Pointee{Data: b}
		}
	}
	for i, m := range p.Members {
		parent := bytesOf(record.MemCapture{Arg: m.Arg, Deep: m.Parent})
		b := bytesOf(record.MemCapture{Arg: m.Arg, Deep: -1, Member: i + 1})
		if len(parent) < m.Off+8 || b == nil {
			continue
		}
		pt := d.pointees[&parent[m.Off]]
		if m.Path {
			pt.Path = b
		} else {
			pt.Data, pt.String = b, true
		}
		d.pointees[&parent[m.Off]] = pt
	}
	for _, pk := range p.Packets {
		skb := bytesOf(record.MemCapture{Arg: pk.Arg, Deep: -1})
		if b := bytesOf(record.MemCapture{Arg: pk.Arg, Deep: -1, Packet: true}); b != nil && len(skb) >= pk.Head+8 {
			d.pointees[&skb[pk.Head]] = decode.Pointee{Data: b, Packet: true}
		}
	}
}

// Show sets the layout of each plan's --show values, by plan index.
func (d *Decoder) Show(blocks []filter.Block) { d.shows = blocks }

// show decodes the --show values of r: the block after its captures,
// when the program appended one.
func (d *Decoder) show(r *Record, out []call.Value) []call.Value {
	if int(r.Func) >= len(d.shows) || len(d.shows[r.Func].Fields) == 0 {
		return out
	}
	b := d.shows[r.Func]
	off := 0
	for i := range d.capsOf(r.Func) {
		off += int(r.CapLen[i])
	}
	if len(r.Data)-off < b.Size {
		return out
	}
	data := r.Data[off : off+b.Size]
	mask := binary.LittleEndian.Uint64(data)
	for i, f := range b.Fields {
		var v call.Value
		switch {
		case mask&(1<<i) == 0:
			v = call.Value{Kind: call.KindUnknown}
		case f.String:
			v = d.dec.CString(data[f.Off : f.Off+filter.ShowString])
		case f.Format == filter.FormatIP:
			v = addr(netip.AddrFrom4([4]byte(data[f.Off : f.Off+4])))
		case f.Format == filter.FormatIPv6:
			v = addr(netip.AddrFrom16([16]byte(data[f.Off : f.Off+16])))
		case f.Format == filter.FormatBuf:
			n := max(int64(binary.LittleEndian.Uint64(data[f.Off:])), 0)
			v = d.dec.Buffer("", data[f.Off+8:f.Off+8+int(min(n, filter.ShowBuf))], uint64(n))
		case f.Format == filter.FormatPort:
			v = call.Value{Kind: call.KindUint, Bits: uint64(binary.BigEndian.Uint16(data[f.Off:]))}
		default:
			v = d.dec.Value(f.Type, data[f.Off:f.Off+8])
			if f.Format == filter.FormatHex && (v.Kind == call.KindInt || v.Kind == call.KindUint) {
				v.Flags |= call.Hex
			}
		}
		v.Name = f.Expr
		out = append(out, v)
	}
	return out
}

func addr(a netip.Addr) call.Value {
	return call.Value{Kind: call.KindString, Str: a.String()}
}

// bufferLen returns the length of a sized buffer of call r: its size
// argument, or the return value when that is what the function filled.
func bufferLen(r *Record, p *plan.Plan, b *plan.SizedBuffer) uint64 {
	n := p.Args[b.LenArg]
	size := r.Slots[n.Slot]
	if n.Size < 8 {
		size &= 1<<(8*n.Size) - 1
	}
	if b.RetLen {
		ret := int64(r.Ret)
		if p.Ret.Size < 8 {
			ret = int64(r.Ret<<(64-8*p.Ret.Size)) >> (64 - 8*p.Ret.Size)
		}
		return min(uint64(max(ret, 0)), size)
	}
	return size
}

// argNames are the names of arguments BTF leaves unnamed, and of the raw
// registers of a function without prototype: as many as the program reads.
var argNames = func() (names [record.MaxSlots]string) {
	for i := range names {
		names[i] = fmt.Sprintf("arg%d", i)
	}
	return names
}()

// argName is the name of argument i where BTF gives none.
func argName(i int) string {
	if i < len(argNames) {
		return argNames[i]
	}
	return fmt.Sprintf("arg%d", i)
}

// comm returns the task name b as a string, the same one for the same
// name.
func (d *Decoder) comm(b [16]int8) string {
	if b == d.lastComm {
		return d.lastName
	}
	s, ok := d.comms[b]
	if !ok {
		s = d.intern(b)
	}
	d.lastComm, d.lastName = b, s
	return s
}

// intern adds the task name b to the interned ones and returns it.
func (d *Decoder) intern(b [16]int8) string {
	if len(d.comms) >= maxComms {
		clear(d.comms)
	}
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	s := make([]byte, n)
	for i := range s {
		s[i] = byte(b[i])
	}
	d.comms[b] = string(s)
	return d.comms[b]
}
