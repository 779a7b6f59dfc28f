// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"fmt"
	"strings"
	"testing"
)

func TestSymbolizer(t *testing.T) {
	s, err := NewSymbolizer(strings.NewReader(`0000000000000000 A fixed_percpu_data
0000000000032000 D __per_cpu_end
ffffffff81000000 T _stext
ffffffff81000100 t __pfx_tcp_sendmsg
ffffffff81000110 T tcp_sendmsg
ffffffff82000000 D init_net
ffffffffc0000000 t ext4_fill_super	[ext4]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		name string
		off  uint64
		ok   bool
	}{
		{0xffffffff81000110, "tcp_sendmsg", 0, true},
		{0xffffffff81000123, "tcp_sendmsg", 0x13, true},
		{0xffffffff82000040, "init_net", 0x40, true},
		{0xffffffffc0000010, "ext4_fill_super", 0x10, true},
		{0xffff888100000000, "", 0, false}, // direct map: heap
		{0xffffffffc1000000, "", 0, false}, // past the last symbol
		{0x40000, "", 0, false},            // user memory, above per-CPU offsets
		{0xffffffff81800000, "", 0, false}, // far from any symbol
	} {
		name, off, ok := s.Symbolize(c.addr)
		if name != c.name || off != c.off || ok != c.ok {
			t.Errorf("Symbolize(%#x) = %q, %#x, %v; want %q, %#x, %v", c.addr, name, off, ok, c.name, c.off, c.ok)
		}
	}
}

func TestSymbolizeCode(t *testing.T) {
	s, err := NewSymbolizer(strings.NewReader(`ffffffff81000110 T tcp_sendmsg
ffffffffa0000000 t bpf_prog_6deef7357e7b4530_fentry_capture	[bpf]
ffffffffc0000000 t ext4_fill_super	[ext4]
ffffffffc0001000 t ext4_iget	[ext4]
ffffffffc0002000 r orc_header	[9p]
`))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[uint64][3]string{
		0xffffffff81000120: {"tcp_sendmsg", "0x10", ""},
		0xffffffffa0000004: {"bpf_prog_6deef7357e7b4530_fentry_capture", "0x4", "bpf"},
		0xffffffffc0001008: {"ext4_iget", "0x8", "ext4"},
	} {
		name, off, mod, ok := s.SymbolizeCode(addr)
		if !ok || name != want[0] || fmt.Sprintf("%#x", off) != want[1] || mod != want[2] {
			t.Errorf("SymbolizeCode(%#x) = %q, %#x, %q, %v; want %v", addr, name, off, mod, ok, want)
		}
	}
	// Past a module's last symbol, data: code loaded after kallsyms was
	// read (a BPF program), which no symbol listed holds.
	if name, off, mod, ok := s.SymbolizeCode(0xffffffffc0042113); ok {
		t.Errorf("SymbolizeCode of an address after a data symbol = %q, %#x, %q; want none", name, off, mod)
	}
}

func TestSymbolAddrs(t *testing.T) {
	ksyms := []uint64{0x1000, 0x2000, 0x3000}
	got := symbolAddrs([]uint64{0x1004, 0x2000, 0x3020}, ksyms)
	want := []uint64{0x1000, 0x2000, 0x3020}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("symbolAddrs[%d] = %#x, want %#x", i, got[i], want[i])
		}
	}
}
