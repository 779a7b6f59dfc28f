// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"
	"math/bits"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// From internal/bpf/capture.h.
const (
	ipHashMul   = uint64(bpf.CaptureIpHashIP_HASH_MUL)
	ipMaxProbes = uint32(bpf.CaptureLimitIP_MAX_PROBES)
)

// AddressTable is the table in which the kprobe programs find the function
// they run for by its address (func_at in capture.c), instead of the attach
// cookie, which a kprobe.multi link finds by a binary search of its
// addresses with an indirect call per step. It is open addressing with
// linear probing: an address sits at its hash or at most ipMaxProbes - 1
// entries after it.
type AddressTable struct {
	// Bits is log2 of the table's size.
	Bits uint32
	// entries has 1 << Bits entries; a free one has address 0.
	entries []bpf.CaptureIpFunc
}

// NewAddressTable places every address of the targets in a table of at
// least twice as many entries, or of up to 16 times as many when some
// address finds no free entry within ipMaxProbes of its hash (about one in
// a thousand does at twice). An address still left out is found by the
// attach cookie, which the program counts.
func NewAddressTable(targets []Target) AddressTable {
	n := 0
	for _, t := range targets {
		n += len(t.Plan.Func.Addrs)
	}
	least := uint32(bits.Len(uint(max(2*n, 2) - 1)))
	var t AddressTable
	for b := least; b <= least+3; b++ {
		t = AddressTable{Bits: b, entries: make([]bpf.CaptureIpFunc, 1<<b)}
		placed := 0
		for _, tg := range targets {
			for _, addr := range tg.Plan.Func.Addrs {
				if t.place(addr, tg.ID) {
					placed++
				}
			}
		}
		if placed == n {
			break
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

// Configure sizes the program's table and fills it when it is created.
func (t AddressTable) Configure(spec *ebpf.CollectionSpec) error {
	m := spec.Maps[bpf.CaptureMapFuncIps]
	m.MaxEntries = 1 << t.Bits
	m.Contents = nil
	for k, v := range t.entries {
		if v.Ip != 0 {
			m.Contents = append(m.Contents, ebpf.MapKV{Key: uint32(k), Value: v})
		}
	}
	if err := spec.Variables[bpf.CaptureVarIpBits].Set(t.Bits); err != nil {
		return fmt.Errorf("set %s: %w", bpf.CaptureVarIpBits, err)
	}
	return nil
}
