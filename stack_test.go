// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"slices"
	"testing"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// TestStackStartAt starts a function's stack at the function and a
// tracepoint's at the function that fired it, whichever the backend.
func TestStackStartAt(t *testing.T) {
	fn := &kernel.Function{Name: "do_sys_openat2"}
	tp := &kernel.Function{Name: "tp:kmem:kmem_cache_alloc", Event: "kmem_cache_alloc", Subsystem: "kmem"}
	caller := []string{"__x64_sys_openat+0x54", "do_syscall_64+0x82"}
	fired := []string{"bpf_trace_run4+0x7e", "__bpf_trace_kmem_cache_alloc+0x13", "__traceiter_kmem_cache_alloc+0x2a", "kmem_cache_alloc_noprof+0x1f1", "getname_flags+0x3e"}
	for _, tc := range []struct {
		name       string
		trampoline bool
		fn         *kernel.Function
		frames     []string
		want       []string
	}{
		{"trampoline", true, fn, caller, append([]string{"do_sys_openat2+0x0"}, caller...)},
		{"kprobe", false, fn, caller, caller},
		{"tracepoint, trampolines", true, tp, fired, fired[3:]},
		{"tracepoint, kprobes", false, tp, fired, fired[3:]},
		{"tracepoint run by itself", false, tp, fired[:1], fired[:1]},
	} {
		s := &stackFrames{cache: map[uint32][]string{1: tc.frames}, trampoline: tc.trampoline, started: map[startKey][]string{}}
		if got := s.startAt(1, tc.fn); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
