// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestTracepointsShareOneProgram checks that from 6.10 one raw_tp program
// serves every tracepoint: a session on the process tracepoints of sched
// loads raw_tp_capture once and no copy of tp_btf_one, and each event
// comes as its tracepoint's: a command run (the test binary, running
// no test) execs once.
func TestTracepointsShareOneProgram(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "the raw_tp program shared by the tracepoints", "amd64-7.3")
	before := programNames(t)
	s, err := trawl.Open(t.Context(), trawl.Config{Patterns: []string{"tp:sched:sched_process_*"}, RingBufferSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	loaded := programNames(t)
	for name, n := range before {
		loaded[name] -= n
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tracepoints attached; programs loaded: %v", st.Attached, loaded)
	if st.Attached < 3 {
		t.Fatalf("%d tracepoints attached, want sched_process_exec, _exit, _fork and more", st.Attached)
	}
	if loaded["raw_tp_capture"] != 1 || loaded["tp_btf_one"] != 0 {
		t.Errorf("%d raw_tp_capture and %d tp_btf_one programs for %d tracepoints, want one raw_tp_capture", loaded["raw_tp_capture"], loaded["tp_btf_one"], st.Attached)
	}
	if err := exec.Command(os.Args[0], "-test.run=^$").Run(); err != nil {
		t.Fatal(err)
	}
	calls := readCalls(t, s, 2*time.Second)
	if n := len(calls["tp:sched:sched_process_exec"]); n != 1 {
		t.Errorf("%d events of sched_process_exec, want the command's one; events: %v", n, calls)
	}
}

// programNames counts the BPF programs loaded in the kernel by name.
func programNames(t *testing.T) map[string]int {
	t.Helper()
	names := map[string]int{}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // unloaded meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		names[info.Name]++
	}
}
