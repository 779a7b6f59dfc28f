// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"testing"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// TestCheckTracepoints refuses what only functions have once a
// tracepoint is selected, and nothing without one.
func TestCheckTracepoints(t *testing.T) {
	fn := &kernel.Function{Name: "vfs_read"}
	tp := &kernel.Function{Name: "tp:sched:sched_switch", Event: "sched_switch", Subsystem: "sched"}
	for _, cfg := range []Config{{Entries: []string{"vfs_read"}}, {Track: "skb"}, {Stack: true}} {
		if err := checkTracepoints([]*kernel.Function{fn, tp}, cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v with a tracepoint: %v, want ErrBadConfig", cfg, err)
		}
		if err := checkTracepoints([]*kernel.Function{fn}, cfg); err != nil {
			t.Errorf("%+v without a tracepoint: %v", cfg, err)
		}
	}
	if err := checkTracepoints([]*kernel.Function{tp}, Config{}); err != nil {
		t.Errorf("a tracepoint alone: %v", err)
	}
}
