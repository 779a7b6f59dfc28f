// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestFormatsAgree captures the known workload once and checks that text,
// tree, JSON, Chrome JSON, Perfetto protobuf and stats output of the same
// calls agree: the same calls (function, task, start, duration) with the
// same values.
func TestFormatsAgree(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "the formats' agreement", guest.SpareArm64)
	_, patterns := knownPatterns(t)
	// fentry runs on every kernel of the test bed; the renderers, not the
	// backend, are under test.
	s, err := trawl.Open(t.Context(), trawl.Config{Patterns: patterns, Backend: trawl.BackendFentry, PIDs: []int{os.Getpid()}})
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel %s: %v", guest.Kernel(), err)
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	workload(t)
	var calls []trawl.Call
	s.SetDeadline(time.Now().Add(2 * time.Second))
	for {
		var c trawl.Call
		err := s.Read(t.Context(), &c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c) // c is fresh each time: Args are not reused
	}
	funcs := map[string]int{}
	for _, c := range calls {
		funcs[c.Func]++
	}
	t.Logf("%s: %d calls: %v", s.Backend, len(calls), funcs)
	if len(funcs) < 3 {
		t.Fatalf("only %d functions called: the workload did not run as expected", len(funcs))
	}
	out, err := renderAll(calls)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range checkFormats(calls, out) {
		t.Error(err)
	}
	if t.Failed() {
		t.Logf("text:\n%s\ntree:\n%s\nstats:\n%s", out.text, out.tree, out.stats)
	}
}
