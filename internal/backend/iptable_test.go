// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"math/rand/v2"
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// find searches the table as func_at in internal/bpf/iptable.h does.
func (t AddressTable) find(ip uint64) (uint32, bool) {
	mask := uint32(1)<<t.Bits - 1
	h := t.hash(ip)
	for i := range ipMaxProbes {
		e := t.entries[(h+i)&mask]
		if e.Ip == 0 {
			break
		}
		if e.Ip == ip {
			return e.Func, true
		}
	}
	return 0, false
}

// textTargets returns n functions at distinct 16-byte aligned addresses in
// a kernel text-like range, the last two sharing a name (two addresses).
func textTargets(r *rand.Rand, n int) []Target {
	seen := map[uint64]bool{}
	addr := func() uint64 {
		for {
			a := 0xffffffff81000000 + r.Uint64N(1<<22)*16
			if !seen[a] {
				seen[a] = true
				return a
			}
		}
	}
	var ts []Target
	for i := range n {
		fn := &kernel.Function{Name: "f", Addrs: []uint64{addr()}}
		if i == n-1 {
			fn.Addrs = append(fn.Addrs, addr())
		}
		ts = append(ts, Target{ID: uint32(i), Plan: &plan.Plan{Func: fn}})
	}
	return ts
}

func TestAddressTable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 20, 1000, 50000} {
		targets := textTargets(r, n)
		tbl := NewAddressTable(targets, AddressBits(funcsOf(targets)))
		addrs := 0
		for _, tg := range targets {
			for _, a := range tg.Plan.Func.Addrs {
				addrs++
				id, ok := tbl.find(a)
				if !ok || id != tg.ID {
					t.Fatalf("n=%d: address %#x found as %d, %v; want %d", n, a, id, ok, tg.ID)
				}
			}
		}
		if size := 1 << tbl.Bits; size < 2*addrs || size > 16*max(addrs, 1) {
			t.Errorf("n=%d: %d entries for %d addresses", n, size, addrs)
		}
		if _, ok := tbl.find(0xffffffff80000000); ok {
			t.Errorf("n=%d: found an address never placed", n)
		}
	}
}

// funcsOf returns the functions of targets, in order.
func funcsOf(targets []Target) []*kernel.Function {
	fns := make([]*kernel.Function, len(targets))
	for i, t := range targets {
		fns[i] = t.Plan.Func
	}
	return fns
}

// TestAddressTableSubset checks that the targets planned among the
// selected functions all find an entry in the table sized for the
// selection, however many of them planning left out.
func TestAddressTableSubset(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	selected := textTargets(r, 50000)
	bits := AddressBits(funcsOf(selected))
	for _, keep := range []float64{0.1, 0.5, 0.99} {
		var targets []Target
		for _, tg := range selected {
			if r.Float64() < keep {
				tg.ID = uint32(len(targets))
				targets = append(targets, tg)
			}
		}
		tbl := NewAddressTable(targets, bits)
		for _, tg := range targets {
			for _, a := range tg.Plan.Func.Addrs {
				if id, ok := tbl.find(a); !ok || id != tg.ID {
					t.Fatalf("keep %.2f: address %#x found as %d, %v; want %d", keep, a, id, ok, tg.ID)
				}
			}
		}
	}
}

func TestConfigureAddressTable(t *testing.T) {
	spec, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	want := AddressBits(funcsOf(textTargets(rand.New(rand.NewPCG(3, 4)), 100)))
	if err := ConfigureAddressTable(spec, want); err != nil {
		t.Fatal(err)
	}
	if m := spec.Maps[bpf.CaptureMapFuncIps]; m.MaxEntries != 1<<want {
		t.Errorf("func_ips: %d entries, want %d", m.MaxEntries, 1<<want)
	}
	var bits uint32
	if err := spec.Variables[bpf.CaptureVarIpBits].Get(&bits); err != nil || bits != want {
		t.Errorf("ip_bits %d (%v), want %d", bits, err, want)
	}
}
