// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"syscall"
	"testing"
)

func TestErrnoBits(t *testing.T) {
	kept := func(bits [(maxErrno + 1) / 64]uint64, e int) bool { return bits[e/64]>>(e%64)&1 == 1 }
	keep, err := errnoBits([]syscall.Errno{syscall.ENOENT, syscall.EINVAL, syscall.ENOENT}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for e, want := range map[int]bool{0: false, int(syscall.ENOENT): true, int(syscall.EINVAL): true, int(syscall.EAGAIN): false, 4095: false} {
		if kept(keep, e) != want {
			t.Errorf("keep ENOENT,EINVAL: errno %d kept %v", e, !want)
		}
	}
	drop, err := errnoBits(nil, []syscall.Errno{syscall.EAGAIN})
	if err != nil {
		t.Fatal(err)
	}
	for e, want := range map[int]bool{0: true, int(syscall.ENOENT): true, int(syscall.EAGAIN): false, 4095: true} {
		if kept(drop, e) != want {
			t.Errorf("all but EAGAIN: errno %d kept %v", e, !want)
		}
	}
	for _, bad := range [][2][]syscall.Errno{{{syscall.ENOENT}, {syscall.EAGAIN}}, {{0}, nil}, {{4096}, nil}} {
		if _, err := errnoBits(bad[0], bad[1]); err == nil {
			t.Errorf("errnoBits(%v, %v) took them", bad[0], bad[1])
		}
	}
}
