// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"errors"
	"testing"
)

func TestCheckMemory(t *testing.T) {
	cost := fentryCost
	if err := checkMemory(1000, cost, 1<<30); err != nil {
		t.Errorf("1000 functions in 1 GB: %v", err)
	}
	// 45,000 functions need about 3 GB: too much for a 4 GB guest.
	err := checkMemory(45000, cost, 4<<30)
	if !errors.Is(err, ErrNotEnoughMemory) {
		t.Fatalf("45000 functions in 4 GB: %v, want ErrNotEnoughMemory", err)
	}
	t.Log(err)
}
