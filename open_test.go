// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
)

// TestConfigure checks that the configured ring buffer size and number of
// targets reach the maps' specs.
func TestConfigure(t *testing.T) {
	spec, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := configure(spec, Config{RingBufferSize: 1 << 20}, 3); err != nil {
		t.Fatal(err)
	}
	if got := spec.Maps[bpf.CaptureMapEvents].MaxEntries; got != 1<<20 {
		t.Errorf("ring buffer of %d bytes, want %d", got, 1<<20)
	}
	if got := spec.Maps[bpf.CaptureMapPlans].MaxEntries; got != 3 {
		t.Errorf("room for %d plans, want 3", got)
	}
}

// TestTakeContents checks that the address table's entries are taken out
// of the spec, to be stored in one batch, and the data sections' are not.
func TestTakeContents(t *testing.T) {
	spec, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	ips := []ebpf.MapKV{{Key: uint32(1), Value: bpf.CaptureIpFunc{Ip: 0xffffffff81000000, Func: 7}}}
	spec.Maps[bpf.CaptureMapFuncIps].Contents = ips
	taken := takeContents(spec)
	if len(taken) != 1 || len(taken[bpf.CaptureMapFuncIps]) != 1 || spec.Maps[bpf.CaptureMapFuncIps].Contents != nil {
		t.Errorf("took %v, left %v in func_ips; want func_ips's one entry taken", taken, spec.Maps[bpf.CaptureMapFuncIps].Contents)
	}
	if len(spec.Maps[".rodata"].Contents) != 1 {
		t.Error(".rodata lost its contents")
	}
}

// TestHistogramLayout: the kernel's --stats buckets have call.Histogram's
// layout, so FunctionStats hands them over as they are.
func TestHistogramLayout(t *testing.T) {
	if bpf.CaptureHistLayoutHIST_EXACT != call.HistogramExact || bpf.CaptureHistLayoutHIST_SUB_BITS != call.HistogramSubBits {
		t.Errorf("capture.h: exact below %d, %d sub-bits; call.Histogram: %d, %d",
			bpf.CaptureHistLayoutHIST_EXACT, bpf.CaptureHistLayoutHIST_SUB_BITS, call.HistogramExact, call.HistogramSubBits)
	}
	if n := len(bpf.CaptureFuncStats{}.Hist); n != int(bpf.CaptureHistLayoutHIST_BUCKETS) {
		t.Errorf("func_stats has %d buckets, HIST_BUCKETS is %d", n, bpf.CaptureHistLayoutHIST_BUCKETS)
	}
}

// selection makes up a selection of n vmlinux functions and m module ones.
func selection(n, m int) *selector.Selection {
	sel := &selector.Selection{}
	for i := range n {
		sel.Selected = append(sel.Selected, &kernel.Function{Name: fmt.Sprint("f", i)})
	}
	for i := range m {
		sel.Selected = append(sel.Selected, &kernel.Function{Name: fmt.Sprint("m", i), Module: "mod"})
	}
	return sel
}

// TestMostTargets checks the bound the maps are sized by before planning:
// every selected function for the kprobe backends, those with a BTF
// prototype for trampolines, and at least one.
func TestMostTargets(t *testing.T) {
	sel := selection(3, 1)
	proto := &btf.Func{Name: "g", Type: &btf.FuncProto{Return: &btf.Void{}}}
	sel.Selected = append(sel.Selected, kernel.FunctionOf(proto), kernel.FunctionOf(proto))
	for _, c := range []struct {
		backend *backend.Backend
		sel     *selector.Selection
		want    int
	}{
		{backend.KprobeMulti, sel, 6},
		{backend.TracingMulti, sel, 2},
		{backend.Fentry, selection(2, 0), 1},
	} {
		s := &Session{sel: c.sel, backend: c.backend}
		if got := s.mostTargets(); got != c.want {
			t.Errorf("%s, %d selected: %d targets at most, want %d", c.backend.Name, len(c.sel.Selected), got, c.want)
		}
	}
}
