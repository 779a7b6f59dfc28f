// SPDX-License-Identifier: Apache-2.0

package decode

import "testing"

func TestJoinPath(t *testing.T) {
	for _, tc := range []struct {
		names, want string
		ok          bool
	}{
		{"version\x00proc\x00/\x00\x00", "/proc/version", true},
		{"/\x00\x00", "/", true},
		{"x\x00version\x00", "…/version/x", true}, // cut before the root
		{"TCP\x00\x00", "TCP", true},              // a socket: no mount tree
		{"\x00\x00", "", false},                   // a pipe: an empty name
		{"", "", false},
	} {
		if got, ok := joinPath([]byte(tc.names)); got != tc.want || ok != tc.ok {
			t.Errorf("joinPath(%q) = %q, %v, want %q, %v", tc.names, got, ok, tc.want, tc.ok)
		}
	}
}
