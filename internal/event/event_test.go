// SPDX-License-Identifier: Apache-2.0

package event

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/decode/decodetest"
	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/record"
)

// recordLayout is struct record as clang laid it out in the compiled
// capture program: each member's offset and element size, read from the
// object's BTF, not from the Go struct bpf2go generates.
type recordLayout struct {
	size    int
	members map[string]recordMember
}

type recordMember struct{ off, size int }

func loadRecordLayout(tb testing.TB) recordLayout {
	tb.Helper()
	spec, err := bpf.LoadCapture()
	if err != nil {
		tb.Fatal(err)
	}
	var rec *btf.Struct
	if err := spec.Types.TypeByName("record", &rec); err != nil {
		tb.Fatal(err)
	}
	l := recordLayout{size: int(rec.Size), members: map[string]recordMember{}}
	for _, m := range rec.Members {
		elem := m.Type
		if arr, ok := btf.UnderlyingType(m.Type).(*btf.Array); ok {
			elem = arr.Type
		}
		size, err := btf.Sizeof(elem)
		if err != nil {
			tb.Fatal(err)
		}
		l.members[m.Name] = recordMember{off: int(m.Offset.Bytes()), size: size}
	}
	return l
}

// put stores x in element i of the member name of the record header at
// the start of buf, in the byte order of the bpfel objects.
func (l recordLayout) put(tb testing.TB, buf []byte, name string, i int, x uint64) {
	tb.Helper()
	m, ok := l.members[name]
	if !ok {
		tb.Fatalf("struct record has no member %s", name)
	}
	b := buf[m.off+i*m.size:]
	switch m.size {
	case 1:
		b[0] = byte(x)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(x))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(x))
	case 8:
		binary.LittleEndian.PutUint64(b, x)
	default:
		tb.Fatalf("member %s has elements of %d bytes", name, m.size)
	}
}

// TestParse writes a distinct value into every member of a record the
// way the kernel lays it out and checks that Parse finds each in its field.
func TestParse(t *testing.T) {
	l := loadRecordLayout(t)
	if l.size != headerSize {
		t.Fatalf("struct record is %d bytes in the object, %d in Go", l.size, headerSize)
	}
	want := bpf.CaptureRecord{
		EntryTs:   0x1111111111111101,
		ExitTs:    0x2222222222222202,
		Ret:       0x3333333333333303,
		Func:      0x44444404,
		Tgid:      0x55555505,
		Pid:       0x66666606,
		Cpu:       0x7707,
		Flags:     0x88,
		Depth:     0x99,
		CapFailed: 0xaa0a,
		DataLen:   5,
		Chain:     0xbbbbbb0b,
	}
	raw := make([]byte, headerSize, headerSize+8)
	for _, m := range []struct {
		name string
		x    uint64
	}{
		{"entry_ts", want.EntryTs}, {"exit_ts", want.ExitTs}, {"ret", want.Ret},
		{"func", uint64(want.Func)}, {"tgid", uint64(want.Tgid)}, {"pid", uint64(want.Pid)},
		{"cpu", uint64(want.Cpu)}, {"flags", uint64(want.Flags)}, {"depth", uint64(want.Depth)},
		{"cap_failed", uint64(want.CapFailed)}, {"data_len", uint64(want.DataLen)}, {"chain", uint64(want.Chain)},
	} {
		l.put(t, raw, m.name, 0, m.x)
	}
	for i := range want.Slots {
		want.Slots[i] = 0xc0c0c0c0c0c0c000 + uint64(i)
		l.put(t, raw, "slots", i, want.Slots[i])
	}
	for i := range want.CapLen {
		want.CapLen[i] = 0xd000 + uint16(i)
		l.put(t, raw, "cap_len", i, uint64(want.CapLen[i]))
	}
	for i, c := range "kworker/u16:3-e" {
		want.Comm[i] = int8(c)
		l.put(t, raw, "comm", i, uint64(c))
	}
	raw = append(raw, "hello!!!"...)

	r, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.CaptureRecord != want {
		t.Errorf("parsed\n%+v\nwant\n%+v", r.CaptureRecord, want)
	}
	if string(r.Data) != "hello" {
		t.Errorf("data %q, want the %d bytes data_len says: %q", r.Data, want.DataLen, "hello")
	}

	if _, err := Parse(raw[:headerSize-1]); !errors.Is(err, ErrShortRecord) {
		t.Errorf("record shorter than its header: %v, want ErrShortRecord", err)
	}
	if _, err := Parse(raw[:headerSize+4]); !errors.Is(err, ErrShortRecord) {
		t.Errorf("record shorter than data_len: %v, want ErrShortRecord", err)
	}
}

// tcpSendmsg returns the plan of tcp_sendmsg(struct sock *sk, struct
// msghdr *msg, size_t size) and a record of a call the kernel would send
// for it, sk's and msg's structs captured.
func tcpSendmsg(tb testing.TB) (*plan.Plan, []byte) {
	return sampleRecord(tb, "tcp_sendmsg", []uint64{0xffff888003a1c000, 0xffffc90000b1bd80, 5}, map[string]map[string]uint64{
		"sk": {
			"__sk_common.skc_family": 2,
			"__sk_common.skc_num":    41234,
			"__sk_common.skc_dport":  0x901f, // 8080, big-endian
			"__sk_common.skc_state":  1,
		},
		"msg": {"msg_namelen": 16},
	})
}

// sampleRecord returns the plan of the fixture's function name and a
// record of a call of it by curl, with the argument registers slots, and
// the members of the structs captured behind them set as members says,
// by argument and member path.
func sampleRecord(tb testing.TB, name string, slots []uint64, members map[string]map[string]uint64) (*plan.Plan, []byte) {
	tb.Helper()
	spec, err := decodetest.Spec()
	if err != nil {
		tb.Fatal(err)
	}
	var fn *btf.Func
	if err := spec.TypeByName(name, &fn); err != nil {
		tb.Fatal(err)
	}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	l := loadRecordLayout(tb)
	raw := make([]byte, headerSize)
	for _, m := range []struct {
		name string
		i    int
		x    uint64
	}{
		{"entry_ts", 0, 1_000_000_000_000}, {"exit_ts", 0, 1_000_000_012_345}, {"ret", 0, 5},
		{"tgid", 0, 4242}, {"pid", 0, 4242}, {"cpu", 0, 1}, {"flags", 0, 3 /* REC_ENTRY | REC_EXIT */},
	} {
		l.put(tb, raw, m.name, m.i, m.x)
	}
	for i, x := range slots {
		l.put(tb, raw, "slots", i, x)
	}
	for i, c := range "curl" {
		l.put(tb, raw, "comm", i, uint64(c))
	}
	for i, c := range record.Captures(p) {
		a := p.Args[c.Arg]
		target, _ := btf.UnderlyingType(a.Type).(*btf.Pointer)
		data := make([]byte, a.Budget)
		for path, x := range members[a.Name] {
			if err := decodetest.Put(data, target.Target, path, x); err != nil {
				tb.Fatal(err)
			}
		}
		l.put(tb, raw, "cap_len", i, uint64(len(data)))
		raw = append(raw, data...)
	}
	l.put(tb, raw, "data_len", 0, uint64(len(raw)-headerSize))
	return p, raw
}

// TestDecoderCall decodes a record of tcp_sendmsg, then one of an exit
// whose entry was missed, from another task, into the same call.
func TestDecoderCall(t *testing.T) {
	p, raw := tcpSendmsg(t)
	exit := bytes.Clone(raw)
	l := loadRecordLayout(t)
	l.put(t, exit, "flags", 0, uint64(bpf.CaptureRecFlagREC_EXIT))
	for i, c := range "kworker/0:1\x00" {
		l.put(t, exit, "comm", i, uint64(c))
	}

	d := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil)
	var c call.Call
	for _, tc := range []struct {
		raw          []byte
		comm         string
		ts, duration uint64
		flags        call.CallFlags
		args         string
	}{
		{raw, "curl", 1_000_000_000_000, 12345, 0, "sk{family=2 src=0 dst=0 sport=41234 dport=8080 state=1} msg{msg_namelen=16} size=5"},
		{exit, "kworker/0:1", 1_000_000_012_345, 0, call.ExitOnly, ""},
		{raw, "curl", 1_000_000_000_000, 12345, 0, "sk{family=2 src=0 dst=0 sport=41234 dport=8080 state=1} msg{msg_namelen=16} size=5"},
	} {
		r, err := Parse(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Call(&r, &c); err != nil {
			t.Fatal(err)
		}
		if c.Comm != tc.comm || c.PID != 4242 || c.TID != 4242 || c.CPU != 1 || c.Func != "tcp_sendmsg" {
			t.Errorf("%s: task %q pid %d tid %d cpu %d function %s, want %q 4242 4242 1 tcp_sendmsg", tc.comm, c.Comm, c.PID, c.TID, c.CPU, c.Func, tc.comm)
		}
		if c.TS != tc.ts || c.Duration != tc.duration || c.Flags != tc.flags {
			t.Errorf("%s: ts %d duration %d flags %d, want %d %d %d", tc.comm, c.TS, c.Duration, c.Flags, tc.ts, tc.duration, tc.flags)
		}
		if got := summary(c.Args); got != tc.args {
			t.Errorf("%s: arguments %s, want %s", tc.comm, got, tc.args)
		}
		if c.Ret.Int() != 5 {
			t.Errorf("%s: returned %d, want 5", tc.comm, c.Ret.Int())
		}
	}
}

// summary shows values as name=bits, and structs as name{members}.
func summary(vs []call.Value) string {
	var s []string
	for _, v := range vs {
		if v.Kind == call.KindStruct {
			s = append(s, v.Name+"{"+summary(v.Fields)+"}")
			continue
		}
		s = append(s, fmt.Sprintf("%s=%d", v.Name, v.Bits))
	}
	return strings.Join(s, " ")
}

// TestDecoderShow decodes the --show block appended to a record of
// tcp_sendmsg: a port, an address, a hex integer and one not read.
func TestDecoderShow(t *testing.T) {
	p, raw := tcpSendmsg(t)
	block := filter.Block{Size: 8 + 4*8, Fields: []filter.Shown{
		{Expr: "sk->__sk_common.skc_num", Type: &btf.Int{Name: "unsigned short", Size: 2}, Off: 8},
		{Expr: "ip(sk->__sk_common.skc_daddr)", Format: filter.FormatIP, Off: 16},
		{Expr: "port(sk->__sk_common.skc_dport)", Format: filter.FormatPort, Off: 24},
		{Expr: "hex(size)", Format: filter.FormatHex, Type: &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}, Off: 32},
	}}
	b := make([]byte, block.Size)
	binary.LittleEndian.PutUint64(b, 0b0111) // hex(size) was not read
	binary.LittleEndian.PutUint64(b[8:], 41234)
	copy(b[16:], []byte{127, 0, 0, 1})
	copy(b[24:], []byte{0x1f, 0x90})
	raw = append(raw, b...)
	loadRecordLayout(t).put(t, raw, "data_len", 0, uint64(len(raw)-headerSize))

	d := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil)
	d.Show([]filter.Block{block})
	r, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var c call.Call
	if err := d.Call(&r, &c); err != nil {
		t.Fatal(err)
	}
	want := []call.Value{
		{Kind: call.KindUint, Name: block.Fields[0].Expr, Bits: 41234},
		{Kind: call.KindString, Name: block.Fields[1].Expr, Str: "127.0.0.1"},
		{Kind: call.KindUint, Name: block.Fields[2].Expr, Bits: 8080},
		{Kind: call.KindUnknown, Name: block.Fields[3].Expr},
	}
	if len(c.Show) != len(want) {
		t.Fatalf("show %+v", c.Show)
	}
	for i := range want {
		if g := c.Show[i]; g.Kind != want[i].Kind || g.Name != want[i].Name || g.Bits != want[i].Bits || g.Str != want[i].Str {
			t.Errorf("show %d: %+v, want %+v", i, g, want[i])
		}
	}
}

// TestDecoderDeep decodes a call whose struct argument holds a pointer
// to a struct captured too (--depth), and one the budget cut.
func TestDecoderDeep(t *testing.T) {
	u64 := &btf.Int{Name: "u64", Size: 8}
	inode := &btf.Struct{Name: "inode", Size: 8, Members: []btf.Member{{Name: "i_ino", Type: u64}}}
	dentry := &btf.Struct{Name: "dentry", Size: 8, Members: []btf.Member{{Name: "d_flags", Type: u64}}}
	file := &btf.Struct{Name: "file", Size: 24, Members: []btf.Member{
		{Name: "f_inode", Type: &btf.Pointer{Target: inode}},
		{Name: "f_dentry", Type: &btf.Pointer{Target: dentry}, Offset: 64},
		{Name: "f_pos", Type: u64, Offset: 128},
	}}
	fn := &btf.Func{Name: "f", Type: &btf.FuncProto{Return: u64, Params: []btf.FuncParam{{Name: "file", Type: &btf.Pointer{Target: file}}}}}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{Depth: 2, CallBudget: 24 + 8 + 4})
	if err != nil {
		t.Fatal(err)
	}
	l := loadRecordLayout(t)
	raw := make([]byte, headerSize)
	l.put(t, raw, "flags", 0, 3)
	l.put(t, raw, "slots", 0, 0xffff888000001000)
	data := binary.LittleEndian.AppendUint64(nil, 0xffff888000002000)
	data = binary.LittleEndian.AppendUint64(data, 0xffff888000003000)
	data = binary.LittleEndian.AppendUint64(data, 77)
	data = binary.LittleEndian.AppendUint64(data, 4242) // the inode
	l.put(t, raw, "cap_len", 0, 24)
	l.put(t, raw, "cap_len", 1, 8)
	raw = append(raw, data...)
	l.put(t, raw, "data_len", 0, uint64(len(data)))
	r, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder([]*plan.Plan{p}, decode.Options{Depth: 3}, nil) // as --depth 3 sets it
	var c call.Call
	if err := d.Call(&r, &c); err != nil {
		t.Fatal(err)
	}
	if got, want := summary(c.Args), "file{f_inode{i_ino=4242} f_dentry{} f_pos=77}"; got != want {
		t.Errorf("arguments %s, want %s", got, want)
	}
	if f := c.Args[0].Fields; len(f) != 3 || !f[1].IsCut() || f[0].IsCut() {
		t.Errorf("f_dentry not marked cut, or f_inode marked: %+v", f)
	}
}

// TestDecoderMembers decodes a call whose struct file argument's path
// and struct filename's name were captured after the structs: the file
// shows its path first, the name its string.
func TestDecoderMembers(t *testing.T) {
	u64 := &btf.Int{Name: "u64", Size: 8}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Char}
	voidP := &btf.Pointer{Target: &btf.Void{}}
	path := &btf.Struct{Name: "path", Size: 16, Members: []btf.Member{{Name: "mnt", Type: voidP}, {Name: "dentry", Type: voidP, Offset: 64}}}
	file := &btf.Struct{Name: "file", Size: 24, Members: []btf.Member{{Name: "f_mode", Type: u64}, {Name: "f_path", Type: path, Offset: 64}}}
	filename := &btf.Struct{Name: "filename", Size: 8, Members: []btf.Member{{Name: "name", Type: &btf.Pointer{Target: &btf.Const{Type: char}}}}}
	fn := &btf.Func{Name: "f", Type: &btf.FuncProto{Return: u64, Params: []btf.FuncParam{
		{Name: "file", Type: &btf.Pointer{Target: file}},
		{Name: "pathname", Type: &btf.Pointer{Target: filename}},
	}}}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := loadRecordLayout(t)
	raw := make([]byte, headerSize)
	l.put(t, raw, "flags", 0, 3)
	l.put(t, raw, "slots", 0, 0xffff888000001000)
	l.put(t, raw, "slots", 1, 0xffff888000002000)
	data := binary.LittleEndian.AppendUint64(nil, 0x4801d)       // f_mode
	data = binary.LittleEndian.AppendUint64(data, 0xffff8880003) // f_path.mnt
	data = binary.LittleEndian.AppendUint64(data, 0xffff8880004) // f_path.dentry
	data = binary.LittleEndian.AppendUint64(data, 0xffff8880005) // name
	names := "version\x00proc\x00/\x00\x00"
	data = append(data, names...)
	data = append(data, "/proc/version/x\x00"...)
	for i, n := range []int{24, 8, len(names), 16} {
		l.put(t, raw, "cap_len", i, uint64(n))
	}
	raw = append(raw, data...)
	l.put(t, raw, "data_len", 0, uint64(len(data)))
	r, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil)
	var c call.Call
	if err := d.Call(&r, &c); err != nil {
		t.Fatal(err)
	}
	if got, want := summary(c.Args), "file{path=0 f_mode=294941} pathname{name=0}"; got != want {
		t.Fatalf("arguments %s, want %s", got, want)
	}
	for i, want := range []string{"/proc/version", "/proc/version/x"} {
		if v := c.Args[i].Fields[0]; v.Kind != call.KindString || v.Str != want {
			t.Errorf("%s->%s: %+v, want the string %q", c.Args[i].Name, v.Name, v, want)
		}
	}
}

// TestDecoderPacket decodes a call of sk_skb_reason_drop whose sk_buff's
// packet was captured: its view starts with the 5-tuple.
func TestDecoderPacket(t *testing.T) {
	spec, err := decodetest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	var fn *btf.Func
	if err := spec.TypeByName("sk_skb_reason_drop", &fn); err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Packets) != 1 || p.Packets[0].Arg != 1 {
		t.Fatalf("packets %+v, want the skb's, argument 2", p.Packets)
	}
	caps := record.Captures(p)
	if len(caps) != 3 || caps[0].Arg != 0 || caps[1].Arg != 1 || !caps[2].Packet {
		t.Fatalf("captures %+v, want the sock's, the skb's and its packet", caps)
	}
	skbType := btf.UnderlyingType(p.Args[1].Type).(*btf.Pointer).Target
	skb := make([]byte, p.Args[1].Budget)
	for path, x := range map[string]uint64{"len": 60, "protocol": 0x0008 /* ETH_P_IP, big-endian */, "head": 0xffff888000010000, "network_header": 14} {
		if err := decodetest.Put(skb, skbType, path, x); err != nil {
			t.Fatal(err)
		}
	}
	pkt := make([]byte, plan.PacketBytes)
	copy(pkt, []byte{0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0x01, 0xbb, 0x1f, 0x90})
	l := loadRecordLayout(t)
	raw := make([]byte, headerSize)
	l.put(t, raw, "flags", 0, 3)
	l.put(t, raw, "slots", 1, 0xffff888000020000)
	// sk is NULL: its capture takes its size all the same, failed.
	sk := make([]byte, p.Args[0].Budget)
	l.put(t, raw, "cap_failed", 0, 1)
	l.put(t, raw, "cap_len", 0, uint64(len(sk)))
	l.put(t, raw, "cap_len", 1, uint64(len(skb)))
	l.put(t, raw, "cap_len", 2, uint64(len(pkt)))
	raw = append(append(append(raw, sk...), skb...), pkt...)
	l.put(t, raw, "data_len", 0, uint64(len(sk)+len(skb)+len(pkt)))
	r, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil)
	var c call.Call
	if err := d.Call(&r, &c); err != nil {
		t.Fatal(err)
	}
	f := c.Args[1].Fields
	if len(f) < 4 || f[0].Str != "10.0.0.1:443" || f[1].Str != "10.0.0.2:8080" || f[2].Str != "TCP" || f[3].Name != "len" || f[3].Bits != 60 {
		t.Errorf("skb view %+v, want src=10.0.0.1:443 dst=10.0.0.2:8080 proto=TCP, then len=60", f)
	}
}

// TestDecoderRawReturn decodes calls of a function without a prototype:
// its raw argument registers, and its return register as a signed long,
// an errno when its lower half is from -4095 to -1.
func TestDecoderRawReturn(t *testing.T) {
	p, err := plan.New(&kernel.Function{Name: "do_sys_openat2", Traceable: true, Copies: 1}, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil)
	l := loadRecordLayout(t)
	for _, tc := range []struct {
		ret  int64
		want string
	}{
		{-2, "ENOENT"},
		{0xffffffec, "ENOTDIR"}, // an int -20: the upper half zero
		{3, ""},
		{-4096, ""},
		{0x7fff12345678, ""},
	} {
		raw := make([]byte, headerSize)
		l.put(t, raw, "flags", 0, 3 /* REC_ENTRY | REC_EXIT */)
		l.put(t, raw, "ret", 0, uint64(tc.ret))
		l.put(t, raw, "slots", 0, 0xffffff9c)
		r, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		var c call.Call
		if err := d.Call(&r, &c); err != nil {
			t.Fatal(err)
		}
		if tc.want != "" && (c.Ret.Kind != call.KindErrno || c.Ret.Str != tc.want) {
			t.Errorf("returned %d: %+v, want %s", tc.ret, c.Ret, tc.want)
		}
		if tc.want == "" && (c.Ret.Kind == call.KindErrno || c.Ret.Int() != tc.ret) {
			t.Errorf("returned %d: %+v, want the number", tc.ret, c.Ret)
		}
		if len(c.Args) == 0 || c.Args[0].Name != "arg0" || c.Args[0].Bits != 0xffffff9c {
			t.Errorf("raw arguments %+v, want arg0=0xffffff9c first", c.Args)
		}
	}
}

// TestDecoderEvent decodes a record of a tracepoint: an event, with its
// arguments but no duration.
func TestDecoderEvent(t *testing.T) {
	p, raw := tcpSendmsg(t)
	tp := *p.Func
	tp.Name, tp.Event, tp.Subsystem = "tp:tcp:tcp_sendmsg", "tcp_sendmsg", "tcp"
	p.Func = &tp
	r, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var c call.Call
	if err := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil).Call(&r, &c); err != nil {
		t.Fatal(err)
	}
	if c.Func != "tp:tcp:tcp_sendmsg" || c.Flags != call.Event || c.Duration != 0 || len(c.Args) != 3 {
		t.Errorf("function %s flags %d duration %d, %d arguments: want tp:tcp:tcp_sendmsg, an event without duration, 3 arguments",
			c.Func, c.Flags, c.Duration, len(c.Args))
	}
}

// taskStruct is a struct task_struct whose pid and comm lie past the
// bytes an argument's budget copies from its start, as in the kernel's.
func taskStruct() *btf.Struct {
	s32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Char}
	return &btf.Struct{Name: "task_struct", Size: 3264, Members: []btf.Member{
		{Name: "__state", Type: s32},
		{Name: "pid", Type: &btf.Typedef{Name: "pid_t", Type: s32}, Offset: 1264 * 8},
		{Name: "comm", Type: &btf.Array{Type: char, Index: s32, Nelems: 16}, Offset: 1752 * 8},
	}}
}

// TestDecoderWindows decodes a call of wake_up_process whose task's pid
// and comm were captured in windows past its first bytes: it reads as
// comm[pid].
func TestDecoderWindows(t *testing.T) {
	fn := &btf.Func{Name: "wake_up_process", Type: &btf.FuncProto{Return: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}, Params: []btf.FuncParam{
		{Name: "p", Type: &btf.Pointer{Target: taskStruct()}},
	}}}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Windows) != 2 {
		t.Fatalf("windows %+v, want the comm's and the pid's", p.Windows)
	}
	l := loadRecordLayout(t)
	raw := make([]byte, headerSize)
	l.put(t, raw, "flags", 0, 3)
	l.put(t, raw, "slots", 0, 0xffff888000001000)
	data := make([]byte, plan.DefaultStructBudget)
	data = append(data, "trawl\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"...)
	data = binary.LittleEndian.AppendUint32(data, 42)
	for i, n := range []int{plan.DefaultStructBudget, 16, 4} {
		l.put(t, raw, "cap_len", i, uint64(n))
	}
	raw = append(raw, data...)
	l.put(t, raw, "data_len", 0, uint64(len(data)))
	r, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil)
	var c call.Call
	if err := d.Call(&r, &c); err != nil {
		t.Fatal(err)
	}
	if v := c.Args[0]; v.Str != "trawl[42]" {
		t.Errorf("p: %q %+v, want trawl[42]", v.Str, v.Fields)
	}
}
