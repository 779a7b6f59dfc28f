// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"os"
	"runtime"
	"testing"

	"github.com/trawl-dev/trawl/internal/kernel"
)

func liveCatalogue(tb testing.TB) *kernel.Catalogue {
	tb.Helper()
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		tb.Skip("no kernel BTF on this machine")
	}
	c, err := kernel.Load(os.DirFS("/"))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// planAll plans every function of the catalogue.
func planAll(tb testing.TB, c *kernel.Catalogue) []*Plan {
	fns := c.Functions()
	plans := make([]*Plan, len(fns))
	for i := range fns {
		p, err := New(&fns[i], Options{})
		if err != nil {
			tb.Fatal(err)
		}
		plans[i] = p
	}
	return plans
}

// TestLivePlans plans every function of this machine's kernel.
func TestLivePlans(t *testing.T) {
	c := liveCatalogue(t)
	plans := planAll(t, c)
	fentry := 0
	for _, p := range plans {
		if p.Attachable(Trampoline, AMD64, KernelVersion{6, 18}) == nil {
			fentry++
		}
	}
	if fentry < len(plans)/2 {
		t.Errorf("only %d of %d functions attachable with fentry", fentry, len(plans))
	}
	p, err := New(c.Lookup("tcp_sendmsg")[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.NumSlots != 3 || p.Args[0].Class != PtrStruct || p.Args[2].Class != Unsigned || p.Args[2].Kprobe[AMD64] != reg(2) {
		t.Errorf("tcp_sendmsg plan: %+v", p)
	}
}

// BenchmarkLoadAndPlanAll loads BTF, builds the catalogue and plans every
// function of this machine's kernel.
func BenchmarkLoadAndPlanAll(b *testing.B) {
	liveCatalogue(b)
	var plans []*Plan
	for b.Loop() {
		plans = planAll(b, liveCatalogue(b))
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "MiB-held")
	b.ReportMetric(float64(len(plans)), "plans")
}
