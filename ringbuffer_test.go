// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"os"
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

func TestCheckRingBufferSize(t *testing.T) {
	page := os.Getpagesize()
	for size, ok := range map[int]bool{
		page:                    true,
		2 * page:                true,
		DefaultRingBufferSize:   true,
		MaxRingBufferSize:       true,
		0:                       false,
		-page:                   false,
		page / 2:                false,
		3 * page:                false,
		page + 1:                false,
		2 * MaxRingBufferSize:   false,
		MaxRingBufferSize + 512: false,
	} {
		if err := CheckRingBufferSize(size); (err == nil) != ok {
			t.Errorf("CheckRingBufferSize(%d) = %v, want ok %v", size, err, ok)
		}
	}
}

// TestConfigureRingBuffer checks that the configured size reaches the ring
// buffer map's spec, the default included, and that a bad size is refused.
func TestConfigureRingBuffer(t *testing.T) {
	for _, tc := range []struct {
		size, want int
	}{
		{0, DefaultRingBufferSize},
		{1 << 20, 1 << 20},
		{MaxRingBufferSize, MaxRingBufferSize},
	} {
		spec, err := bpf.LoadCapture()
		if err != nil {
			t.Fatal(err)
		}
		if err := configure(spec, Config{RingBufferSize: tc.size}, 1); err != nil {
			t.Fatalf("size %d: %v", tc.size, err)
		}
		if got := spec.Maps[bpf.CaptureMapEvents].MaxEntries; got != uint32(tc.want) {
			t.Errorf("size %d: ring buffer of %d bytes, want %d", tc.size, got, tc.want)
		}
	}
	spec, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := configure(spec, Config{RingBufferSize: 12345}, 1); err == nil {
		t.Error("a ring buffer of 12345 bytes was configured")
	}
}

// TestRingBufferSizeLoaded checks that the kernel's ring buffer map has
// the size asked for.
func TestRingBufferSizeLoaded(t *testing.T) {
	guest.Require(t)
	const size = 256 << 10
	s, err := Open(t.Context(), Config{Patterns: []string{"vfs_read"}, RingBufferSize: size})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.coll.Maps[bpf.CaptureMapEvents].MaxEntries(); got != size {
		t.Errorf("ring buffer of %d bytes, want %d", got, size)
	}
}
