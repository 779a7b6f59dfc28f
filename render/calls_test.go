// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/decode/decodetest"
)

// symbols is a fake kallsyms.
type symbols []struct {
	addr, size uint64
	name       string
}

func (s symbols) Symbolize(addr uint64) (string, uint64, bool) {
	for _, sym := range s {
		if addr >= sym.addr && addr < sym.addr+sym.size {
			return sym.name, addr - sym.addr, true
		}
	}
	return "", 0, false
}

var testSymbols = symbols{
	{0xffffffff82016e40, 0x100, "ext4_file_operations"},
	{0xffffffff81c8e500, 0x2a0, "tcp_prot"},
}

// builder makes Calls of real kernel functions from the BTF fixture.
type builder struct {
	t    testing.TB
	spec *btf.Spec
	dec  *decode.Decoder
}

func newBuilder(t testing.TB) *builder {
	spec, err := decodetest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return &builder{t: t, spec: spec, dec: decode.NewDecoder(decode.Options{}, testSymbols)}
}

// arg is one argument: its slot and the bytes captured behind it.
type arg struct {
	slot uint64
	data []byte
	hi   uint64
}

// call decodes args and ret for function fn into c.
func (b *builder) call(c call.Call, fn string, ret uint64, args ...arg) call.Call {
	proto, err := decodetest.Func(b.spec, fn)
	if err != nil {
		b.t.Fatal(err)
	}
	if len(args) != len(proto.Params) && c.Flags&call.ExitOnly == 0 {
		b.t.Fatalf("%s takes %d arguments, got %d", fn, len(proto.Params), len(args))
	}
	c.Func = fn
	c.Args = nil
	for i, a := range args {
		p := proto.Params[i]
		c.Args = append(c.Args, b.dec.Arg(p.Name, p.Type, decode.Raw{Slots: [2]uint64{a.slot, a.hi}, Data: a.data}))
	}
	if c.Flags&call.EntryOnly == 0 {
		c.Ret = b.dec.Ret(proto.Return, ret)
	}
	return c
}

// pointee returns a buffer of n bytes of the type fn's argument points to,
// with the members at paths set to values.
func (b *builder) pointee(fn, argName string, n int, set map[string]uint64) []byte {
	proto, err := decodetest.Func(b.spec, fn)
	if err != nil {
		b.t.Fatal(err)
	}
	typ, err := decodetest.Pointee(proto, argName)
	if err != nil {
		b.t.Fatal(err)
	}
	buf := make([]byte, n)
	for path, x := range set {
		if err := decodetest.Put(buf, typ, path, x); err != nil {
			b.t.Fatal(err)
		}
	}
	return buf
}

func be16(x uint16) uint64 { return uint64(x>>8 | x<<8) }

func neg(x int64) uint64 { return uint64(x) }

func le64(x uint64) []byte { return binary.LittleEndian.AppendUint64(nil, x) }

const (
	t0     = 1_000_000_000_000 // ns of the kernel clock
	wallAt = 1_700_000_000_000_000_000 - t0
)

// testCalls is a capture of real kernel functions, in completion order
// (children before their parents), covering the decoder's paths.
func testCalls(t testing.TB) []call.Call {
	b := newBuilder(t)
	sock := b.pointee("tcp_sendmsg", "sk", 256, map[string]uint64{
		"__sk_common.skc_family": 2,
		"__sk_common.skc_num":    41234,
		"__sk_common.skc_dport":  be16(8080),
		"__sk_common.skc_state":  1,
		"__sk_common.skc_prot":   0xffffffff81c8e500,
	})
	msg := b.pointee("tcp_sendmsg", "msg", 104, map[string]uint64{
		"msg_flags":      0x40,
		"msg_iter.count": 5,
	})
	file := b.pointee("vfs_read", "file", 184, map[string]uint64{
		"f_mode":  0x4801d,
		"f_flags": 0x8000,
		"f_op":    0xffffffff82016e40,
		"f_pos":   4096,
	})
	skb := b.pointee("sk_skb_reason_drop", "skb", 256, map[string]uint64{
		"len":      98,
		"protocol": be16(0x0800),
		"skb_iif":  2,
	})
	how := b.pointee("do_sys_openat2", "how", 24, map[string]uint64{"flags": 0x8000})
	const atFDCWD = -100
	return []call.Call{
		b.call(call.Call{TS: t0 + 1500, Duration: 4200, Depth: 1, CPU: 0, PID: 5000, TID: 5001, Comm: "cat"},
			"do_filp_open", neg(-2),
			arg{slot: neg(atFDCWD)}, arg{slot: 0xffff888004b2c000}, arg{slot: 0xffffc90000a3fe10}),
		b.call(call.Call{TS: t0 + 1000, Duration: 12345, CPU: 1, PID: 4242, TID: 4242, Comm: "curl"},
			"tcp_sendmsg", 5,
			arg{slot: 0xffff888003a1c000, data: sock}, arg{slot: 0xffffc90000b1bd80, data: msg}, arg{slot: 5}),
		b.call(call.Call{TS: t0 + 800, Duration: 8000, CPU: 0, PID: 5000, TID: 5001, Comm: "cat"},
			"do_sys_openat2", neg(-2),
			arg{slot: neg(atFDCWD)}, arg{slot: 0x7ffd5e3c1f20, data: []byte("/etc/passwd\x00")}, arg{slot: 0xffffc90000a3fef0, data: how}),
		b.call(call.Call{TS: t0 + 20000, Duration: 2100, CPU: 0, PID: 5000, TID: 5001, Comm: "cat"},
			"vfs_read", 1234,
			arg{slot: 0xffff888005d1e200, data: file}, arg{slot: 0x7ffd5e3c0000}, arg{slot: 131072}, arg{slot: 0xffffc90000a3ff00, data: le64(0)}),
		b.call(call.Call{TS: t0 + 30000, Duration: 750, CPU: 2, PID: 0, TID: 0, Comm: "swapper/2"},
			"sk_skb_reason_drop", 0,
			arg{slot: 0}, arg{slot: 0xffff888006e3a900, data: skb}, arg{slot: 3}),
		b.call(call.Call{TS: t0 + 40000, Duration: 1_500_000, CPU: 0, PID: 5000, TID: 5001, Comm: "cat"},
			"__x64_sys_close", neg(-9),
			arg{slot: 0xffffc90000a3ff58}),
		b.call(call.Call{TS: t0 + 50000, Duration: 2_300_000_000, CPU: 3, PID: 97, TID: 97, Comm: "kswapd0"},
			"try_to_unmap", 0,
			arg{slot: 0xffffea0000123400}, arg{slot: 0x10 | 0x40}),
		b.call(call.Call{TS: t0 + 60000, Duration: 300, CPU: 1, PID: 812, TID: 812, Comm: "chronyd"},
			"__audit_tk_injoffset", 0,
			arg{slot: 1, hi: 500000}),
		b.call(call.Call{TS: t0 + 70000, Duration: 900, Flags: call.Missed, CPU: 1, PID: 4242, TID: 4242, Comm: "curl"},
			"tcp_sendmsg", neg(-32),
			arg{slot: 0xffff888003a1c000, data: sock[:18]}, arg{slot: 0xffffc90000b1bd80}, arg{slot: 4096}),
		b.call(call.Call{TS: t0 + 80000, Flags: call.ExitOnly, CPU: 1, PID: 4242, TID: 4242, Comm: "curl"},
			"tcp_set_state", 0),
		b.call(call.Call{TS: t0 + 90000, Flags: call.EntryOnly, CPU: 0, PID: 5000, TID: 5001, Comm: "cat"},
			"vfs_read", 0,
			arg{slot: 0xffff888005d1e200, data: file[:40]}, arg{slot: 0x7ffd5e3c0000}, arg{slot: 131072}, arg{slot: 0xffffc90000a3ff00}),
	}
}
