// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"os"
	"reflect"
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

// planAll plans every function of the catalogue, as a session does.
func planAll(tb testing.TB, c *kernel.Catalogue) []*Plan {
	fns := c.Functions()
	plans := make([]*Plan, len(fns))
	planner := NewPlanner(Options{})
	for i := range fns {
		p, err := planner.Plan(&fns[i])
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

// TestPlannerLive checks, for every function of this machine's kernel,
// that a planner working out each prototype once plans it as New does.
func TestPlannerLive(t *testing.T) {
	c := liveCatalogue(t)
	fns := c.Functions()
	opts := Options{Depth: 3, Buffers: []BufferSpec{{Func: "vfs_write", Arg: "buf", SizeArg: "count"}}}
	planner := NewPlanner(opts)
	for i := range fns {
		fn := &fns[i]
		got, gotErr := planner.Plan(fn)
		want, wantErr := New(fn, opts)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: planner error %v, New's %v", fn.Name, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: planner's plan\n%+v\nNew's\n%+v", fn.Name, got, want)
		}
	}
}

// BenchmarkPlanAll plans every function of this machine's kernel, its BTF
// already decoded: with a planner, as a session does, and one New each.
func BenchmarkPlanAll(b *testing.B) {
	c := liveCatalogue(b)
	fns := c.Functions()
	planAll(b, c)
	b.Run("planner", func(b *testing.B) {
		for b.Loop() {
			planAll(b, c)
		}
	})
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			for i := range fns {
				if _, err := New(&fns[i], Options{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
