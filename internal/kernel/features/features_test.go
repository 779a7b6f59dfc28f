// SPDX-License-Identifier: Apache-2.0

package features

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWithoutMemlockHint(t *testing.T) {
	eperm := fmt.Errorf("load program: %w"+memlockHint, unix.EPERM)
	err := fmt.Errorf("load TraceFEntry program: %w", WithoutMemlockHint(eperm))
	if want := "load TraceFEntry program: load program: operation not permitted"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if !errors.Is(err, unix.EPERM) {
		t.Error("the error without the hint does not match EPERM")
	}
	if other := errors.New("load program: invalid argument"); WithoutMemlockHint(other) != other {
		t.Error("an error without the hint is not returned as it is")
	}
}

// TestProbesSayNoMemlock runs every probe on the running kernel: where
// one fails (the host's kernel refuses BPF tracing programs with EPERM),
// its error must not blame the locked memory limit.
func TestProbesSayNoMemlock(t *testing.T) {
	for _, r := range Probe() {
		if r.Err != nil && strings.Contains(r.Err.Error(), "MEMLOCK") {
			t.Errorf("%s: %v", r.Feature.Name, r.Err)
		}
	}
}
