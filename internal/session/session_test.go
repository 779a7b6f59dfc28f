// SPDX-License-Identifier: Apache-2.0

package session

import (
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
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
	if err := configure(spec, Config{RingBufferSize: 1 << 20, Comm: "a-name-too-long-for-the-kernel"}, 1); err == nil {
		t.Error("a 30-character comm was configured")
	}
}

// TestRingBufferSizeLoaded checks that the kernel's ring buffer map has
// the size asked for.
func TestRingBufferSizeLoaded(t *testing.T) {
	guest.Require(t)
	const size = 256 << 10
	cat, release, err := kernel.Hold()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	s, err := Open(t.Context(), cat, Config{Patterns: []string{"vfs_read"}, RingBufferSize: size, Notify: func(n string) { t.Log(n) }}, LiveProbe)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.capture.Collection.Maps[bpf.CaptureMapEvents].MaxEntries(); got != size {
		t.Errorf("ring buffer of %d bytes, want %d", got, size)
	}
}
