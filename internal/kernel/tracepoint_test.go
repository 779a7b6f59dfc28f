// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/cilium/ebpf/btf"
)

// tracepointFixture is the amd64 fixture with the running machine's
// vmlinux BTF, which declares the btf_trace_ typedefs, and tracefs
// events: two BTF-typed ones of sched, one of skb, and one without a
// typedef.
func tracepointFixture(t *testing.T) fstest.MapFS {
	t.Helper()
	data, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Skip("no vmlinux BTF to read tracepoints from:", err)
	}
	m := fixture(t, nil)
	m["sys/kernel/btf/vmlinux"] = &fstest.MapFile{Data: data}
	for _, f := range []string{"sched/enable", "sched/sched_process_exec/format", "sched/sched_switch/format",
		"skb/kfree_skb/format", "sched/not_a_tracepoint/format", "header_page"} {
		m["sys/kernel/tracing/events/"+f] = &fstest.MapFile{}
	}
	return m
}

func TestTracepoints(t *testing.T) {
	c, err := Load(tracepointFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range c.Tracepoints() {
		names = append(names, tp.Name)
	}
	want := []string{"tp:sched:sched_process_exec", "tp:sched:sched_switch", "tp:skb:kfree_skb"}
	if len(names) != len(want) {
		t.Fatalf("tracepoints %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("tracepoints %v, want %v", names, want)
		}
	}
	exec := c.Tracepoints()[0]
	if !exec.IsTracepoint() || exec.Event != "sched_process_exec" || exec.Subsystem != "sched" {
		t.Errorf("sched_process_exec: %+v", exec)
	}
	proto := exec.Proto()
	if proto == nil {
		t.Fatal("sched_process_exec has no prototype")
	}
	params := proto.Type.(*btf.FuncProto).Params
	// The typedef's first argument, the tracepoint's data, is left out.
	if len(params) != 3 {
		t.Fatalf("sched_process_exec takes %d arguments, want 3: %s", len(params), Declaration(proto.Type, exec.Name))
	}
	// Where BTF has no __bpf_trace_sched_process_exec (5.10), the
	// arguments are named by their place.
	if got := TypeString(params[2].Type); got != "struct linux_binprm *" || params[2].Name != "bprm" && params[2].Name != "arg2" {
		t.Errorf("third argument %s %s, want struct linux_binprm *bprm (or arg2)", got, params[2].Name)
	}
	t.Log(Declaration(proto.Type, exec.Name))
}
