// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"os"
	"strconv"
	"testing"
)

func TestNSPIDs(t *testing.T) {
	ids, err := nsPIDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc is this process's namespace's: its pid there comes first.
	if len(ids) == 0 || ids[0] != strconv.Itoa(os.Getpid()) {
		t.Errorf("NSpid of this process %v, want its pid %d first", ids, os.Getpid())
	}
	if _, err := nsPIDs(-1); err == nil {
		t.Error("no error for pid -1")
	}
}
