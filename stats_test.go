// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// TestStatsHasEveryCounter checks that every counter of capture.h, up to
// CNT_MAX, has its own field in Stats in counterFields.
func TestStatsHasEveryCounter(t *testing.T) {
	var st Stats
	seen := map[*uint64]bpf.CaptureCounter{}
	for c := range bpf.CaptureCounterCNT_MAX {
		field := counterFields[c]
		if field == nil {
			t.Errorf("counter %d of capture.h has no Stats field in counterFields", c)
			continue
		}
		p := field(&st)
		if other, ok := seen[p]; ok {
			t.Errorf("counters %d and %d of capture.h share a Stats field", other, c)
		}
		seen[p] = c
	}
}
