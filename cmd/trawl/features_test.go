// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestFeaturesStatus checks that trawl features exits 1 exactly when no
// backend can attach (the host's kernel refuses BPF tracing programs),
// saying why in one line, without cilium/ebpf's MEMLOCK hint; and 0 in a
// test bed guest, where every kernel has a backend.
func TestFeaturesStatus(t *testing.T) {
	stdout, stderr, status := runReal(t, "features")
	none := strings.Contains(stdout, "auto picks      nothing")
	t.Logf("status %d\n%s%s", status, stdout, stderr)
	switch {
	case guest.Kernel() != "" && (none || status != 0 || stderr != ""):
		t.Errorf("in the %s guest: status %d, want 0 and a backend picked", guest.Kernel(), status)
	case none && (status != 1 || !strings.HasPrefix(stderr, "trawl: ") || strings.Count(stderr, "\n") != 1):
		t.Errorf("no backend can attach: status %d, want 1 and one line on stderr saying why", status)
	case !none && (status != 0 || stderr != ""):
		t.Errorf("a backend can attach: status %d, want 0 and nothing on stderr", status)
	}
	if strings.Contains(stdout+stderr, "MEMLOCK") {
		t.Error("cilium/ebpf's MEMLOCK hint is shown")
	}
}
