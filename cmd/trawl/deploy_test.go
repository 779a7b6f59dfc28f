// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestServiceFile checks that deploy/trawl.service runs trawl as
// TestServiceCapabilities does in the guests: as root, bounded to the
// same capabilities, with no ambient ones (root's capabilities after exec
// are its bounding set).
func TestServiceFile(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/trawl.service")
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if key, value, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[key] = value
		}
	}
	if got := strings.Fields(settings["CapabilityBoundingSet"]); !slices.Equal(got, serviceCaps) {
		t.Errorf("CapabilityBoundingSet=%v, the guests test %v", got, serviceCaps)
	}
	for _, key := range []string{"AmbientCapabilities", "User", "DynamicUser"} {
		if v, ok := settings[key]; ok {
			t.Errorf("%s=%s: the guests test trawl as root with no ambient capabilities", key, v)
		}
	}
}
