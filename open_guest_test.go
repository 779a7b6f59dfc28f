// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestRingBufferSizeLoaded checks that the kernel's ring buffer map has
// the size asked for.
func TestRingBufferSizeLoaded(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "the ring buffer's size", "arm64-5.10")
	const size = 256 << 10
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	s, err := open(t.Context(), cat, Config{Patterns: []string{"vfs_read"}, RingBufferSize: size, Notify: func(n string) { t.Log(n) }}, backend.LiveProbe)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if got := s.capture.Collection.Maps[bpf.CaptureMapEvents].MaxEntries(); got != size {
		t.Errorf("ring buffer of %d bytes, want %d", got, size)
	}
}

// TestReadContext checks that a Read waiting for calls returns once its
// context is done, and that the next Read, with another context, waits
// for the deadline SetDeadline set again.
func TestReadContext(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "a Read's context", guest.SpareArm64)
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// Only BPF_PROG_TEST_RUN calls it: no call comes.
	cfg := Config{Patterns: []string{"bpf_fentry_test1"}, RingBufferSize: 1 << 20, Notify: func(n string) { t.Log(n) }}
	s, err := open(t.Context(), cat, cfg, backend.LiveProbe)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	var c call.Call
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Read(ctx, &c); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Read with a context that times out: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Read returned %s after its context was done", d)
	}
	s.SetDeadline(time.Now().Add(200 * time.Millisecond))
	start = time.Now()
	if err := s.Read(context.Background(), &c); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Read after a deadline: %v", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("Read returned after %s, before the deadline", d)
	}
}
