// SPDX-License-Identifier: Apache-2.0

package features

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExplainParanoid checks that a perf event refused at
// perf_event_paranoid 3 (Debian's default) without CAP_SYS_ADMIN says so
// and how to get past it, and that other refusals pass unchanged.
func TestExplainParanoid(t *testing.T) {
	refused := fmt.Errorf("opening perf event: %w", unix.EACCES)
	err := explainParanoid(refused, 3, false)
	if !errors.Is(err, ErrPerfParanoid) || !errors.Is(err, unix.EACCES) ||
		!strings.Contains(err.Error(), "kernel.perf_event_paranoid is 3") || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") {
		t.Errorf("at paranoid 3: %v", err)
	}
	for _, tc := range []struct {
		err      error
		paranoid int
		sysAdmin bool
	}{
		{refused, 2, false},
		{refused, 3, true},
		{fmt.Errorf("opening perf event: %w", unix.ENOENT), 3, false},
		{nil, 3, false},
	} {
		if got := explainParanoid(tc.err, tc.paranoid, tc.sysAdmin); got != tc.err {
			t.Errorf("%v at paranoid %d, CAP_SYS_ADMIN %v: %v, want it unchanged", tc.err, tc.paranoid, tc.sysAdmin, got)
		}
	}
}
