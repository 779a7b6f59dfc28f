// SPDX-License-Identifier: Apache-2.0

package kernel

import "testing"

func TestNameSet(t *testing.T) {
	s := newNameSet([]string{"vfs_read", "tcp_v4_send_reset.llvm.123", "bar", "bar.isra.0"})
	for name, want := range map[string]bool{
		"vfs_read":                   true,
		"vfs_read.isra.0":            true, // a clone of a named function
		"vfs_write":                  false,
		"vfs_rea":                    false,
		"tcp_v4_send_reset.llvm.123": true,
		"tcp_v4_send_reset":          false, // only its prototype is needed
		"tcp_v4_send_reset.llvm.456": false,
		"bar":                        true, // named, and the base of a named clone
		"bar.isra.0":                 true,
		"":                           false,
	} {
		if got := s.has(name); got != want {
			t.Errorf("has(%q) = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]bool{
		"vfs_read":          true,
		"tcp_v4_send_reset": true,
		"bar":               true,
		"vfs_write":         false,
		"":                  false,
	} {
		if got := s.needsProto([]byte(name)); got != want {
			t.Errorf("needsProto(%q) = %v, want %v", name, got, want)
		}
	}
	var all *nameSet
	if !all.has("anything") || !all.needsProto([]byte("anything")) {
		t.Error("a nil set must keep every name")
	}
}
