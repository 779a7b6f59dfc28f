// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestServiceFile checks that deploy/trawl.service gives trawl the
// capabilities TestServiceCapabilities runs it with in the guests.
func TestServiceFile(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/trawl.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"CapabilityBoundingSet=", "AmbientCapabilities="} {
		var got []string
		for _, line := range strings.Split(string(unit), "\n") {
			if rest, ok := strings.CutPrefix(line, key); ok {
				got = strings.Fields(rest)
			}
		}
		if !slices.Equal(got, serviceCaps) {
			t.Errorf("%s%v, the guests test %v", key, got, serviceCaps)
		}
	}
}
