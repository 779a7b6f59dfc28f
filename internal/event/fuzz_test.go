// SPDX-License-Identifier: Apache-2.0

package event

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/decode/decodetest"
	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/record"
)

// fuzzPlans returns plans of every kind of capture, from the kernel BTF
// fixture and hand-made types: scalars and structs (tcp_sendmsg),
// strings and a struct (do_sys_openat2), a sized buffer filled at exit
// (vfs_read), a packet (sk_skb_reason_drop), structs nested by --depth
// and cut by the call's budget, and a function without prototype; with
// --show blocks for two of them.
func fuzzPlans(tb testing.TB) ([]*plan.Plan, []filter.Block) {
	tb.Helper()
	spec, err := decodetest.Spec()
	if err != nil {
		tb.Fatal(err)
	}
	var plans []*plan.Plan
	add := func(fn *btf.Func, opts plan.Options) {
		p, err := plan.New(kernel.FunctionOf(fn), opts)
		if err != nil {
			tb.Fatalf("plan of %s: %v", fn.Name, err)
		}
		plans = append(plans, p)
	}
	named := func(name string) *btf.Func {
		var fn *btf.Func
		if err := spec.TypeByName(name, &fn); err != nil {
			tb.Fatal(err)
		}
		return fn
	}
	add(named("tcp_sendmsg"), plan.Options{})
	add(named("do_sys_openat2"), plan.Options{StringBudget: 32})
	add(named("vfs_read"), plan.Options{BufferBudget: 64})
	add(named("sk_skb_reason_drop"), plan.Options{})
	add(named("vfs_read"), plan.Options{Depth: 3, CallBudget: 1024})
	u64 := &btf.Int{Name: "u64", Size: 8}
	inode := &btf.Struct{Name: "inode", Size: 8, Members: []btf.Member{{Name: "i_ino", Type: u64}}}
	file := &btf.Struct{Name: "file", Size: 24, Members: []btf.Member{
		{Name: "f_inode", Type: &btf.Pointer{Target: inode}},
		{Name: "f_dentry", Type: &btf.Pointer{Target: inode}, Offset: 64},
		{Name: "f_pos", Type: u64, Offset: 128},
	}}
	add(&btf.Func{Name: "f", Type: &btf.FuncProto{Return: u64, Params: []btf.FuncParam{{Name: "file", Type: &btf.Pointer{Target: file}}}}}, plan.Options{Depth: 2, CallBudget: 24 + 8 + 4})
	plans = append(plans, &plan.Plan{Func: &kernel.Function{Name: "no_proto"}})

	long := &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}
	shows := []filter.Block{
		{Size: 8 + 4*8, Fields: []filter.Shown{
			{Expr: "sk->__sk_common.skc_num", Type: &btf.Int{Name: "unsigned short", Size: 2}, Off: 8},
			{Expr: "ip(sk->__sk_common.skc_daddr)", Format: filter.FormatIP, Off: 16},
			{Expr: "port(sk->__sk_common.skc_dport)", Format: filter.FormatPort, Off: 24},
			{Expr: "hex(size)", Format: filter.FormatHex, Type: long, Off: 32},
		}},
		{Size: 8 + filter.ShowString + 16 + 8 + filter.ShowBuf, Fields: []filter.Shown{
			{Expr: "str(filename)", String: true, Off: 8},
			{Expr: "ip6(how)", Format: filter.FormatIPv6, Off: 8 + filter.ShowString},
			{Expr: "buf(filename, 8)", Format: filter.FormatBuf, Off: 8 + filter.ShowString + 16},
		}},
	}
	return plans, shows
}

// fuzzRecord returns a record of plan id of plans that the kernel could
// send: each capture of its plan filled from fill on, and show bytes of
// --show values after them.
func fuzzRecord(tb testing.TB, plans []*plan.Plan, id int, flags uint64, fill byte, show []byte) []byte {
	l := loadRecordLayout(tb)
	raw := make([]byte, headerSize)
	l.put(tb, raw, "func", 0, uint64(id))
	l.put(tb, raw, "flags", 0, flags)
	l.put(tb, raw, "entry_ts", 0, 1000)
	l.put(tb, raw, "exit_ts", 0, 2000)
	l.put(tb, raw, "ret", 0, 5)
	for i := range 6 {
		l.put(tb, raw, "slots", i, 0xffff888000001000+uint64(i)*0x100)
	}
	for i, c := range record.Captures(plans[id]) {
		n := plans[id].Args[c.Arg].Budget
		if c.Packet {
			n = plan.PacketBytes
		}
		if c.Deep >= 0 {
			n = 8
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = fill + byte(j)
		}
		l.put(tb, raw, "cap_len", i, uint64(n))
		raw = append(raw, b...)
	}
	raw = append(raw, show...)
	l.put(tb, raw, "data_len", 0, uint64(len(raw)-headerSize))
	return raw
}

// FuzzRecord parses and decodes random records with plans of every kind
// of capture: neither may panic or hang, whatever the kernel sent.
func FuzzRecord(f *testing.F) {
	plans, shows := fuzzPlans(f)
	p, raw := tcpSendmsg(f)
	plans[0] = p
	f.Add(raw, false)
	f.Add(raw[:headerSize], true)
	showBytes := make([]byte, shows[1].Size)
	binary.LittleEndian.PutUint64(showBytes, 0b111)
	binary.LittleEndian.PutUint64(showBytes[8+filter.ShowString+16:], 300)
	for id := range plans {
		for _, flags := range []uint64{3, 1, 2, 0xff} {
			f.Add(fuzzRecord(f, plans, id, flags, byte(id*16), nil), id%2 == 0)
		}
		f.Add(fuzzRecord(f, plans, id, 3, 0, showBytes), true)
	}
	decoders := map[bool]*Decoder{}
	for _, full := range []bool{false, true} {
		d := NewDecoder(plans, decode.Options{Depth: 4, Full: full, MaxBytes: 32}, nil)
		d.Show(shows)
		decoders[full] = d
	}
	var c call.Call
	f.Fuzz(func(t *testing.T, raw []byte, full bool) {
		r, err := Parse(raw)
		if err != nil {
			return
		}
		// Every plan, not only the few IDs the mutations keep, and
		// one unknown.
		r.Func %= uint32(len(plans) + 1)
		if err := decoders[full].Call(&r, &c); err != nil && int(r.Func) < len(plans) {
			t.Fatalf("record of plan %d: %v", r.Func, err)
		}
	})
}
