// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
)

func TestShow(t *testing.T) {
	fx := loadFixture(t)
	openat := fx.plan(t, "do_sys_openat2") // (int dfd, const char *filename, struct open_how *how)
	const how, name = 0x3000, 0x4000
	var exprs []ShowExpr
	for _, src := range []string{"how->mode", "filename", "-dfd", "hex(how->flags)", "sk->sk_mark", "ipv6(dfd)"} {
		e, err := ParseShow(src)
		if err != nil {
			t.Fatal(err)
		}
		exprs = append(exprs, e)
	}
	body, block, missing, err := CompileShow(exprs, openat, fx.consts)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 2 || !errors.Is(missing[0], ErrMissing) {
		t.Errorf("missing: %v, want sk->sk_mark's and ipv6(dfd)'s", missing)
	}
	if f := block.Fields[3]; f.Format != FormatHex || f.Expr != "hex(how->flags)" {
		t.Errorf("field 3: %+v", f)
	}
	if len(block.Fields) != 4 || block.Size != 8+8+ShowString+8+8 || !block.Fields[1].String {
		t.Fatalf("block %+v", block)
	}
	prog, err := Program([]Func{{ID: 3, Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	// A frame with 5 bytes of captures; open_how {flags u64, mode u64}.
	frame := make([]byte, int(bpf.CaptureLimitMAX_DATA)+int(dataOff)+512)
	binary.LittleEndian.PutUint32(frame[funcOff:], 3)
	binary.LittleEndian.PutUint16(frame[dataLenOff:], 5)
	binary.LittleEndian.PutUint64(frame[int(slotsOff):], uint64(0xffffff9c)) // AT_FDCWD as an int
	binary.LittleEndian.PutUint64(frame[int(slotsOff)+8:], name)
	binary.LittleEndian.PutUint64(frame[int(slotsOff)+16:], how)
	m := &machine{record: frame, writeRecord: true,
		kernel: map[uint64][]byte{how: mem(16, 8, binary.LittleEndian.AppendUint64(nil, 0o640))},
		user:   map[uint64][]byte{name: []byte("/tmp/x\x00")},
	}
	if _, err := m.run(prog); err != nil {
		t.Fatalf("%v\n%v", err, prog)
	}
	if n := binary.LittleEndian.Uint16(frame[dataLenOff:]); int(n) != 5+block.Size {
		t.Errorf("data_len %d, want %d", n, 5+block.Size)
	}
	b := frame[int(dataOff)+5:]
	if mask := binary.LittleEndian.Uint64(b); mask != 0b1111 {
		t.Errorf("mask %b", mask)
	}
	u64 := func(f int) uint64 { return binary.LittleEndian.Uint64(b[block.Fields[f].Off:]) }
	if u64(0) != 0o640 || int64(u64(2)) != 100 || u64(3) != 0 {
		t.Errorf("values %#x %d %d", u64(0), int64(u64(2)), u64(3))
	}
	if s := string(b[block.Fields[1].Off:][:7]); s != "/tmp/x\x00" {
		t.Errorf("filename %q", s)
	}

	// A frame whose data is full gets no block.
	binary.LittleEndian.PutUint16(frame[dataLenOff:], uint16(bpf.CaptureLimitMAX_DATA)-10)
	if _, err := m.run(prog); err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint16(frame[dataLenOff:]); n != uint16(bpf.CaptureLimitMAX_DATA)-10 {
		t.Errorf("data_len %d after a full frame", n)
	}
}

// TestShowBuf runs buf(PTR, LEN): bytes of user memory (the kernel read
// fails), a length past ShowBuf, and a negative one, which reads nothing.
func TestShowBuf(t *testing.T) {
	fx := loadFixture(t)
	openat := fx.plan(t, "do_sys_openat2") // (int dfd, const char *filename, struct open_how *how)
	const name = 0x4000
	var exprs []ShowExpr
	for _, src := range []string{"buf(filename, 3)", "buf(filename, 200)", "buf(how, -1)", "buf(dfd, 1)"} {
		e, err := ParseShow(src)
		if err != nil {
			t.Fatal(err)
		}
		exprs = append(exprs, e)
	}
	if _, err := ParseShow("buf(filename)"); err == nil {
		t.Error("buf(filename) parsed")
	}
	body, block, missing, err := CompileShow(exprs, openat, fx.consts)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || len(block.Fields) != 3 || block.Size != 8+3*(8+ShowBuf) {
		t.Fatalf("missing %v (want buf(dfd, 1)'s), block %+v", missing, block)
	}
	if msg := missing[0].Error(); !strings.Contains(msg, "buf(dfd, 1)\n      ^") {
		t.Errorf("error %q does not point at dfd in the whole expression", msg)
	}
	prog, err := Program([]Func{{ID: 3, Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, int(bpf.CaptureLimitMAX_DATA)+int(dataOff)+512)
	binary.LittleEndian.PutUint32(frame[funcOff:], 3)
	binary.LittleEndian.PutUint64(frame[int(slotsOff):], 0)
	binary.LittleEndian.PutUint64(frame[int(slotsOff)+8:], name)
	long := make([]byte, 300)
	copy(long, "/tmp/x")
	m := &machine{record: frame, writeRecord: true, user: map[uint64][]byte{name: long}}
	if _, err := m.run(prog); err != nil {
		t.Fatalf("%v\n%v", err, prog)
	}
	b := frame[int(dataOff):]
	if mask := binary.LittleEndian.Uint64(b); mask != 0b111 {
		t.Errorf("mask %b", mask)
	}
	for i, want := range []struct {
		n    int64
		data string
	}{{3, "/tm"}, {200, "/tmp/x"}, {-1, ""}} {
		f := b[block.Fields[i].Off:]
		n := int64(binary.LittleEndian.Uint64(f))
		data := f[8 : 8+ShowBuf]
		got := string(data[:min(max(n, 0), ShowBuf)])
		if n != want.n || len(got) < len(want.data) || got[:len(want.data)] != want.data {
			t.Errorf("%s: length %d, bytes %q, want %d, %q", exprs[i].Src, n, got, want.n, want.data)
		}
	}
}
