// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// TestStatsHasEveryCounter checks that every counter of capture.h has its
// field in Stats, which addCounters fills.
func TestStatsHasEveryCounter(t *testing.T) {
	counters, err := bpf.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if len(counters) == 0 {
		t.Fatal("the capture program has no counters")
	}
	for _, c := range counters {
		if _, ok := statsField(c.Name); !ok {
			t.Errorf("counter %s of capture.h has no uint64 field in Stats named as it is without CNT_ and underscores", c.Name)
		}
	}
}
