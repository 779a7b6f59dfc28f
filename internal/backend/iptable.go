// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"
	"math/bits"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
)

// From internal/bpf/capture.h.
const (
	ipHashMul   = uint64(bpf.CaptureIpHashIP_HASH_MUL)
	ipMaxProbes = uint32(bpf.CaptureLimitIP_MAX_PROBES)
)

// AddressTable is the table in which the kprobe programs find the function
// they run for by its address (func_at in internal/bpf/iptable.h), instead
// of the attach cookie, which a kprobe.multi link finds by a binary search
// of its addresses with an indirect call per step. It is open addressing with
// linear probing: an address sits at its hash or at most ipMaxProbes - 1
// entries after it.
type AddressTable struct {
	// Bits is log2 of the table's size.
	Bits uint32
	// entries has 1 << Bits entries; a free one has address 0.
	entries []bpf.CaptureIpFunc
}

// AddressBits returns log2 of the size of the address table for the
// addresses of fns: at least twice as many entries, or up to 16 times as
// many when some address finds no free entry within ipMaxProbes of its
// hash (about one in a thousand does at twice). It takes the selected
// functions, so that the program can be loaded while they are planned.
func AddressBits(fns []*kernel.Function) uint32 {
	n := 0
	for _, fn := range fns {
		n += len(fn.Addrs)
	}
	least := uint32(bits.Len(uint(max(2*n, 2) - 1)))
	for b := least; b < least+3; b++ {
		t := AddressTable{Bits: b, entries: make([]bpf.CaptureIpFunc, 1<<b)}
		placed := 0
		for i, fn := range fns {
			for _, addr := range fn.Addrs {
				if t.place(addr, uint32(i)) {
					placed++
				}
			}
		}
		if placed == n {
			return b
		}
	}
	return least + 3
}

// NewAddressTable places every address of the targets in a table of
// 1<<bits entries. With bits from AddressBits of the functions the
// targets are among, in the same order, every address finds an entry:
// linear probing places the addresses of some of the functions no
// farther from their hashes than it places those of all. An address
// still left out is found by the attach cookie, which the program counts.
func NewAddressTable(targets []Target, bits uint32) AddressTable {
	t := AddressTable{Bits: bits, entries: make([]bpf.CaptureIpFunc, 1<<bits)}
	for _, tg := range targets {
		for _, addr := range tg.Plan.Func.Addrs {
			t.place(addr, tg.ID)
		}
	}
	return t
}

// hash is the entry an address starts its search at.
func (t AddressTable) hash(ip uint64) uint32 {
	return uint32((ip * ipHashMul) >> (64 - t.Bits))
}

// place puts ip with function id in the first free entry from its hash,
// and says whether there was one.
func (t AddressTable) place(ip uint64, id uint32) bool {
	mask := uint32(1)<<t.Bits - 1
	h := t.hash(ip)
	for i := range ipMaxProbes {
		k := (h + i) & mask
		if t.entries[k].Ip == 0 {
			t.entries[k] = bpf.CaptureIpFunc{Ip: ip, Func: id}
			return true
		}
	}
	return false
}

// ConfigureAddressTable sizes the program's table for 1<<bits entries.
func ConfigureAddressTable(spec *ebpf.CollectionSpec, bits uint32) error {
	spec.Maps[bpf.CaptureMapFuncIps].MaxEntries = 1 << bits
	if err := spec.Variables[bpf.CaptureVarIpBits].Set(bits); err != nil {
		return fmt.Errorf("set %s: %w", bpf.CaptureVarIpBits, err)
	}
	return nil
}

// Store fills the loaded table m, of 1<<t.Bits entries, with one batch
// update: one syscall per entry took seconds for every function under
// emulation.
func (t AddressTable) Store(m *ebpf.Map) error {
	var keys []uint32
	var values []bpf.CaptureIpFunc
	for k, v := range t.entries {
		if v.Ip != 0 {
			keys = append(keys, uint32(k))
			values = append(values, v)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := m.BatchUpdate(keys, values, nil); err != nil {
		return fmt.Errorf("store the address table: %w", err)
	}
	return nil
}
