// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// TestTracepointPlan plans kfree_skb's tracepoint from this machine's
// btf_trace_kfree_skb: the socket buffer and the drop reason, an enum
// decoded by name, and attachable whichever the backend's family.
func TestTracepointPlan(t *testing.T) {
	vmlinux, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Skip("no kernel BTF on this machine")
	}
	c, err := kernel.Load(fstest.MapFS{
		"sys/kernel/btf/vmlinux":                     {Data: vmlinux},
		"proc/kallsyms":                              {},
		"sys/kernel/tracing/events/skb/kfree_skb/id": {},
	})
	if err != nil {
		t.Fatal(err)
	}
	tps := c.Tracepoints()
	if len(tps) != 1 || tps[0].Name != "tp:skb:kfree_skb" {
		t.Fatalf("tracepoints %+v, want tp:skb:kfree_skb", tps)
	}
	p, err := New(&tps[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Args) < 3 || p.Args[0].Class != PtrStruct || p.Args[2].Class != Enum {
		t.Fatalf("kfree_skb's plan: %+v", p.Args)
	}
	if p.Ret.Class != Void {
		t.Errorf("returns a %s, want nothing", p.Ret.Class)
	}
	for _, f := range []Family{Trampoline, Kprobe} {
		if err := p.Attachable(f, AMD64, KernelVersion{5, 10}); err != nil {
			t.Errorf("not attachable with the %s family: %v", f, err)
		}
	}
}
