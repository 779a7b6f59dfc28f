// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestStaleGate makes the exit of an entry call go missing, with each
// backend, and checks that the next call of the entry function shuts the
// gate it left open. A test run of an fentry program calls
// bpf_fentry_test1 then bpf_fentry_test2, from the calling thread: with
// --entry bpf_fentry_test1, the call of bpf_fentry_test2 is outside. The
// test writes the thread's shadow back as if bpf_fentry_test1's exit had
// been missed (its call still on the stack, its gate open), then calls
// again until a call of bpf_fentry_test1 finds the gate stale (the stack
// offset of each system call may be random, and a call below the stale
// one's position is taken as nested in it): the gate is shut, counted, and
// bpf_fentry_test2 is outside again.
func TestStaleGate(t *testing.T) {
	guest.Require(t)
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	trigger, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTo: "bpf_fentry_test1",
		License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer trigger.Close()
	for _, b := range backend.All() {
		if b.Needs() != nil {
			continue
		}
		t.Run(string(b.Name), func(t *testing.T) {
			// The shadow is the test run's task's: keep this goroutine
			// on one thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			pidfd, err := unix.PidfdOpen(unix.Gettid(), unix.PIDFD_THREAD)
			if errors.Is(err, unix.EINVAL) {
				t.Skip("pidfd_open takes no thread before 6.9: the test cannot reach its thread's shadow")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pidfd)
			cfg := Config{Patterns: []string{"bpf_fentry_test2"}, Entries: []string{"bpf_fentry_test1"}, Backend: Backend(b.Name), RingBufferSize: 1 << 20, Notify: func(n string) { t.Log(n) }}
			s, err := open(t.Context(), cat, cfg, backend.LiveProbe)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			counter := func(id bpf.CaptureCounter) uint64 {
				c, err := s.counts()
				if err != nil {
					t.Fatal(err)
				}
				return c.Counters[id]
			}
			if _, err := trigger.Run(&ebpf.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			if n := counter(bpf.CaptureCounterCNT_OUTSIDE_ENTRY); n != 1 {
				t.Fatalf("%d calls outside, want 1", n)
			}
			// The entry call's exit goes missing: depth and gate as
			// they were inside it.
			shadows := s.capture.Collection.Maps[bpf.CaptureMapShadows]
			var shadow []byte
			if err := shadows.Lookup(int32(pidfd), &shadow); err != nil {
				t.Fatal(err)
			}
			binary.NativeEndian.PutUint32(shadow[0:], 1) // depth
			binary.NativeEndian.PutUint32(shadow[4:], 1) // entry_at
			if err := shadows.Put(int32(pidfd), shadow); err != nil {
				t.Fatal(err)
			}
			gates := s.capture.Collection.Variables[bpf.CaptureVarOpenGates]
			if err := gates.Set(uint32(1)); err != nil {
				t.Fatal(err)
			}
			runs := 0
			for ; runs < 100 && counter(bpf.CaptureCounterCNT_STALE_GATES) == 0; runs++ {
				if _, err := trigger.Run(&ebpf.RunOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var open uint32
			if err := gates.Get(&open); err != nil {
				t.Fatal(err)
			}
			stale, outside := counter(bpf.CaptureCounterCNT_STALE_GATES), counter(bpf.CaptureCounterCNT_OUTSIDE_ENTRY)
			if stale != 1 || open != 0 || outside != 2 {
				t.Errorf("after %d calls: %d stale gates, %d open, %d calls outside; want 1, 0, 2", runs, stale, open, outside)
			}
		})
	}
}
