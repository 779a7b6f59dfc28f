// SPDX-License-Identifier: Apache-2.0

package decode_test

import (
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/decode/decodetest"
)

func fixture(t testing.TB) *btf.Spec {
	spec, err := decodetest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func proto(t testing.TB, spec *btf.Spec, fn string) *btf.FuncProto {
	p, err := decodetest.Func(spec, fn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRetErrno(t *testing.T) {
	spec := fixture(t)
	d := decode.NewDecoder(decode.Options{}, nil)
	for _, tc := range []struct {
		fn   string
		raw  uint64
		kind call.Kind
		str  string
	}{
		{"__x64_sys_close", uint64(^uint64(1)), call.KindErrno, "ENOENT"}, // -2
		{"__x64_sys_close", uint64(1<<64 - 512), call.KindErrno, "ERESTARTSYS"},
		{"__x64_sys_close", 0, call.KindInt, ""},
		{"tcp_sendmsg", 0xffffffff, call.KindErrno, "EPERM"}, // int: -1 in the low 32 bits
		{"do_filp_open", uint64(1<<64 - 12), call.KindErrno, "ENOMEM"},
		{"do_filp_open", 0xffff888004b2c000, call.KindPointer, ""},
		{"tcp_set_state", 0, call.KindNone, ""},
	} {
		v := d.Ret(proto(t, spec, tc.fn).Return, tc.raw)
		if v.Kind != tc.kind || v.Str != tc.str {
			t.Errorf("%s returning %#x: kind %d %q, want %d %q", tc.fn, tc.raw, v.Kind, v.Str, tc.kind, tc.str)
		}
	}
}

// TestGuessedRet names the errors of a return register nothing tells the
// type of: an int's (upper half zero), a long's or an error pointer's.
func TestGuessedRet(t *testing.T) {
	d := decode.NewDecoder(decode.Options{}, nil)
	for _, tc := range []struct {
		raw  uint64
		kind call.Kind
		str  string
	}{
		{uint64(1<<64 - 2), call.KindErrno, "ENOENT"},
		{0xffffffec, call.KindErrno, "ENOTDIR"},
		{uint64(1<<64 - 1), call.KindErrno, "EPERM"},
		{uint64(1<<64 - 4096), call.KindInt, ""},
		{0, call.KindInt, ""},
		{0xffff888004b2c000, call.KindInt, ""},
	} {
		if v := d.GuessedRet(tc.raw); v.Kind != tc.kind || v.Str != tc.str || v.Kind == call.KindInt && v.Bits != tc.raw {
			t.Errorf("%#x: kind %s %q bits %#x, want %s %q", tc.raw, v.Kind, v.Str, v.Bits, tc.kind, tc.str)
		}
	}
}

func TestFlagEnum(t *testing.T) {
	spec := fixture(t)
	p := proto(t, spec, "try_to_unmap")
	d := decode.NewDecoder(decode.Options{}, nil)
	for raw, want := range map[uint64]string{0x10: "TTU_SYNC", 0x50: "TTU_SYNC|TTU_BATCH_FLUSH", 0x13: "TTU_SYNC|0x3", 0: ""} {
		v := d.Arg("flags", p.Params[1].Type, decode.Raw{Slots: [2]uint64{raw}})
		if v.Kind != call.KindEnum || v.Str != want || v.Uint() != raw {
			t.Errorf("flags %#x: %q, want %q", raw, v.Str, want)
		}
	}
}

func TestStructByValue(t *testing.T) {
	spec := fixture(t)
	p := proto(t, spec, "__audit_tk_injoffset")
	d := decode.NewDecoder(decode.Options{}, nil)
	v := d.Arg("offset", p.Params[0].Type, decode.Raw{Slots: [2]uint64{1, 1<<64 - 5}})
	if len(v.Fields) != 2 || v.Fields[0].Int() != 1 || v.Fields[1].Int() != -5 {
		t.Errorf("timespec64 by value: %+v", v)
	}
}

func TestString(t *testing.T) {
	spec := fixture(t)
	p := proto(t, spec, "do_sys_openat2")
	d := decode.NewDecoder(decode.Options{MaxBytes: 4}, nil)
	for _, tc := range []struct {
		data  string
		str   string
		more  int32
		trunc bool
	}{
		{"/etc\x00junk", "/etc", 0, false},
		{"/etc/passwd\x00", "/etc", 7, false},
		{"/et", "/et", 0, true}, // cut by the capture budget
	} {
		v := d.Arg("filename", p.Params[1].Type, decode.Raw{Slots: [2]uint64{0x7ffd0000}, Data: []byte(tc.data)})
		if v.Kind != call.KindString || v.Str != tc.str || v.More != tc.more || v.IsTruncated() != tc.trunc {
			t.Errorf("%q: %+v", tc.data, v)
		}
	}
}

func TestTruncatedStruct(t *testing.T) {
	spec := fixture(t)
	p := proto(t, spec, "tcp_sendmsg")
	sk, err := decodetest.Pointee(p, "sk")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if err := decodetest.Put(buf, sk, "__sk_common.skc_family", 10); err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		d := decode.NewDecoder(decode.Options{Full: full}, nil)
		v := d.Arg("sk", p.Params[0].Type, decode.Raw{Slots: [2]uint64{0xffff888000000000}, Data: buf[:17]})
		if !v.IsTruncated() || len(v.Fields) == 0 {
			t.Errorf("full=%v: 17 bytes of sock not marked truncated: %+v", full, v)
		}
	}
	d := decode.NewDecoder(decode.Options{}, nil)
	v := d.Arg("sk", p.Params[0].Type, decode.Raw{Slots: [2]uint64{0xffff888000000000}, Data: buf})
	if v.Fields[0].Name != "family" || v.Fields[0].Str != "AF_INET6" || v.IsTruncated() {
		t.Errorf("sock view: %+v", v)
	}
}

func TestBitfieldsAndDepth(t *testing.T) {
	spec := fixture(t)
	p := proto(t, spec, "sk_skb_reason_drop")
	skb, err := decodetest.Pointee(p, "skb")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if err := decodetest.Put(buf, skb, "active_extensions", 0); err != nil {
		t.Fatal(err)
	}
	buf[126] = 0b0000_1100 // cloned=0 nohdr=0 fclone=3 (bits 2-3)
	d := decode.NewDecoder(decode.Options{Full: true, Depth: 1}, nil)
	v := d.Value(skb, buf)
	found := false
	for _, f := range v.Fields {
		switch {
		case f.Name == "fclone":
			found = f.Uint() == 3
		case f.Kind == call.KindStruct && !f.IsElided():
			t.Errorf("member %s nested deeper than Depth 1 is shown", f.Name)
		}
	}
	if !found {
		t.Errorf("bitfield fclone not decoded as 3: %+v", v.Fields)
	}
}

func TestSymbolize(t *testing.T) {
	spec := fixture(t)
	p := proto(t, spec, "__x64_sys_close")
	d := decode.NewDecoder(decode.Options{}, symbolizer{})
	v := d.Arg("regs", p.Params[0].Type, decode.Raw{Slots: [2]uint64{0xffffffff81000010}})
	if v.Kind != call.KindPointer || v.Str != "_stext" || v.Off != 0x10 {
		t.Errorf("pointer: %+v", v)
	}
}

type symbolizer struct{}

func (symbolizer) Symbolize(addr uint64) (string, uint64, bool) {
	if addr >= 0xffffffff81000000 && addr < 0xffffffff81001000 {
		return "_stext", addr - 0xffffffff81000000, true
	}
	return "", 0, false
}

// FuzzDecode feeds random bytes, lengths and options to every argument of
// the fixture's functions: the decoder must never panic.
func FuzzDecode(f *testing.F) {
	spec := fixture(f)
	var protos []*btf.FuncProto
	for _, fn := range []string{"tcp_sendmsg", "vfs_read", "do_sys_openat2", "do_filp_open", "sk_skb_reason_drop", "try_to_unmap", "__audit_tk_injoffset"} {
		protos = append(protos, proto(f, spec, fn))
	}
	f.Add([]byte("hello\x00"), uint64(0xffff888000000000), uint8(0), false)
	f.Add(make([]byte, 300), uint64(1), uint8(5), true)
	f.Fuzz(func(t *testing.T, data []byte, slot uint64, depth uint8, full bool) {
		d := decode.NewDecoder(decode.Options{Depth: int(depth % 8), Full: full}, symbolizer{})
		for _, p := range protos {
			for _, param := range p.Params {
				d.Arg(param.Name, param.Type, decode.Raw{Slots: [2]uint64{slot, slot >> 7}, Data: data})
				if ptr, ok := btf.UnderlyingType(param.Type).(*btf.Pointer); ok {
					d.Value(ptr.Target, data)
				}
			}
			d.Ret(p.Return, slot)
		}
	})
}

func TestBuffer(t *testing.T) {
	d := decode.NewDecoder(decode.Options{MaxBytes: 8}, nil)
	for _, tc := range []struct {
		data []byte
		n    uint64
		kind call.Kind
		str  string
		more int32
	}{
		{[]byte("ping"), 4, call.KindString, "ping", 0},
		{[]byte("pinghello"), 4, call.KindString, "ping", 0}, // never past the length
		{[]byte("hi\n"), 3, call.KindString, "hi\n", 0},
		{[]byte("a\x00b"), 3, call.KindBytes, "a\x00b", 0},
		{[]byte("0123456789"), 100, call.KindString, "01234567", 92},
		{[]byte{}, 0, call.KindString, "", 0},
		{[]byte{0xff, 0xfe}, 2, call.KindBytes, "\xff\xfe", 0},
	} {
		v := d.Buffer("buf", tc.data, tc.n)
		if v.Kind != tc.kind || v.Str != tc.str || v.More != tc.more || v.Name != "buf" || !v.IsBuffer() {
			t.Errorf("Buffer(%q, %d) = %s %q more %d buffer %v, want %s %q more %d buffer true", tc.data, tc.n, v.Kind, v.Str, v.More, v.IsBuffer(), tc.kind, tc.str, tc.more)
		}
	}
}

func TestSockaddr(t *testing.T) {
	d := decode.NewDecoder(decode.Options{}, nil)
	in4 := []byte{2, 0, 0x01, 0xbb, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	in6 := make([]byte, 28)
	in6[0], in6[2], in6[3], in6[23] = 10, 0x1f, 0x90, 1
	unix := []byte{1, 0, '/', 't', 'm', 'p'}
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"sockaddr_in", in4, "10.0.0.1:443"},
		{"sockaddr", in4, "10.0.0.1:443"},
		{"sockaddr_unsized", in4, "10.0.0.1:443"},
		{"sockaddr_in6", in6, "[::1]:8080"},
		{"sockaddr_storage", in6, "[::1]:8080"},
		{"sockaddr_in6", in6[:20], ""}, // address cut: the struct
		{"sockaddr", unix, ""},         // not an internet address
	} {
		v := d.Value(&btf.Struct{Name: tc.name, Size: 16}, tc.raw)
		if tc.want == "" && v.Kind == call.KindString || tc.want != "" && (v.Kind != call.KindString || v.Str != tc.want) {
			t.Errorf("%s %x: %s %q, want %q", tc.name, tc.raw, v.Kind, v.Str, tc.want)
		}
	}
}

// TestWideAnonymousMembers decodes a struct of malformed BTF whose
// anonymous members hold the same anonymous struct four times, down to
// the nesting bound: flattening it must stop well before visiting 4^16
// members.
func TestWideAnonymousMembers(t *testing.T) {
	u32 := &btf.Int{Name: "u32", Size: 4}
	anon := &btf.Struct{Size: 4}
	anon.Members = []btf.Member{{Type: anon}, {Type: anon}, {Type: anon}, {Type: anon}, {Name: "x", Type: u32}}
	outer := &btf.Struct{Name: "outer", Size: 4, Members: []btf.Member{{Type: anon}}}
	for _, full := range []bool{false, true} {
		v := decode.NewDecoder(decode.Options{Full: full}, nil).Value(outer, []byte{1, 0, 0, 0})
		if v.Kind != call.KindStruct {
			t.Errorf("full %v: %+v, want a struct", full, v)
		}
	}
}

// TestMembersKept decodes many calls' structs, by the default view and
// in full, and checks that each call's members are as decoded after
// the later calls: the decoder hands out their memory only once.
func TestMembersKept(t *testing.T) {
	spec := fixture(t)
	p := proto(t, spec, "__x64_sys_close")
	regs, err := decodetest.Pointee(p, "regs")
	if err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		d := decode.NewDecoder(decode.Options{Full: full}, nil)
		var got []call.Value
		for i := range 1000 {
			buf := make([]byte, 168)
			for _, m := range []string{"di", "si", "ip"} {
				if err := decodetest.Put(buf, regs, m, uint64(i+1)); err != nil {
					t.Fatal(err)
				}
			}
			got = append(got, d.Arg("regs", p.Params[0].Type, decode.Raw{Slots: [2]uint64{0xffffc90000000000}, Data: buf}))
		}
		for i, v := range got {
			n := 0
			for _, f := range v.Fields {
				if f.Name == "di" || f.Name == "si" || f.Name == "ip" {
					n++
					if f.Uint() != uint64(i+1) {
						t.Fatalf("full=%v: call %d's %s is %d after later calls", full, i, f.Name, f.Uint())
					}
				}
			}
			if n != 3 {
				t.Fatalf("full=%v: call %d shows %d of di, si and ip: %+v", full, i, n, v)
			}
		}
	}
}
