// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"os"
	"testing"
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

// TestRingBufferSizeConfig checks that the size reaches the session's
// configuration, the default included, and that a bad size is refused.
func TestRingBufferSizeConfig(t *testing.T) {
	for _, tc := range []struct {
		size, want int
	}{
		{0, DefaultRingBufferSize},
		{1 << 20, 1 << 20},
		{MaxRingBufferSize, MaxRingBufferSize},
	} {
		cfg := Config{Patterns: []string{"f"}, RingBufferSize: tc.size}
		err := cfg.Validate()
		if got := cfg.withDefaults().RingBufferSize; err != nil || got != tc.want {
			t.Errorf("size %d: ring buffer of %d bytes (%v), want %d", tc.size, got, err, tc.want)
		}
	}
	if err := (Config{Patterns: []string{"f"}, RingBufferSize: 12345}).Validate(); err == nil {
		t.Error("a ring buffer of 12345 bytes was configured")
	}
}
