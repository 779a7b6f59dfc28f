// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

func TestInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  []uint16
		want bool
	}{
		{"no slots", nil, true},
		{"registers in order", []uint16{0, 1, 2}, true},
		{"a struct on the stack, then registers", []uint16{0, srcStack | 8, srcStack | 16, 1}, false},
		{"registers out of order", []uint16{1, 0}, false},
		{"more slots than registers", []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8}, false},
	} {
		var w bpf.CapturePlan
		w.NrSlots = uint8(len(tc.src))
		copy(w.Src[:], tc.src)
		if got := inOrder(w, plan.ARM64); got != tc.want {
			t.Errorf("%s: inOrder %v, want %v", tc.name, got, tc.want)
		}
	}
}
