// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"slices"
	"testing"

	"github.com/trawl-dev/trawl"
)

// TestBackends checks that Backends lists every Backend constant once,
// auto first, and nothing else: the constants name the registry's entries.
func TestBackends(t *testing.T) {
	want := []trawl.Backend{trawl.BackendAuto, trawl.BackendFentry, trawl.BackendFsession, trawl.BackendKprobe,
		trawl.BackendKprobeMulti, trawl.BackendKprobeSession, trawl.BackendTracingMulti}
	if !slices.Equal(trawl.Backends, want) {
		t.Errorf("Backends = %v, want %v", trawl.Backends, want)
	}
}
