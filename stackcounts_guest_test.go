// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

//go:noinline
func getppidHere() { syscall.Getppid() }

//go:noinline
func getppidThere() { syscall.Getppid() }

// TestStackCountsFull counts this process's calls of getppid by user
// stack in a map of one entry: the calls from the first call site take
// it, and those from another are counted without their stacks, in Stats
// and under UncountedStack, so that the counts still add up. (The frame
// of getppidHere is left out of its stacks: the system call's assembly
// makes no frame, and the frame pointer it leaves leads to the caller's
// return address. The two call sites in the test tell the stacks
// apart.)
func TestStackCountsFull(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "a full map of counts by stack", "amd64-7.3")
	const here, there = 100, 50
	s, err := Open(t.Context(), Config{Patterns: []string{"*sys_getppid"}, PIDs: []int{os.Getpid()}, Aggregate: true, UserStack: true,
		StackCounts: 1, Notify: func(n string) { t.Log(n) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range here {
		getppidHere()
	}
	for range there {
		getppidThere()
	}
	check := func(when string) {
		counts, err := s.StackCounts()
		if err != nil {
			t.Fatal(err)
		}
		var counted, uncounted uint64
		for _, c := range counts {
			t.Logf("%s: %d calls of %s: %q %q", when, c.Calls, c.Func, c.Stack, c.UStack)
			switch {
			case slices.Equal(c.Stack, []string{call.UncountedStack}) && c.UStack == nil:
				uncounted += c.Calls
			case slices.ContainsFunc(c.UStack, func(f string) bool { return strings.Contains(f, ".TestStackCountsFull+") }) && c.PID == uint32(os.Getpid()):
				counted += c.Calls
			default:
				t.Errorf("%s: %d calls of %s under %q %q, want this test's user stack or %s", when, c.Calls, c.Func, c.Stack, c.UStack, call.UncountedStack)
			}
		}
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if counted != here || uncounted != there || st.MissStackCount != there {
			t.Errorf("%s: %d calls under getppidHere's stack, %d not counted by stack (Stats: %d); want %d, %d", when, counted, uncounted, st.MissStackCount, here, there)
		}
	}
	check("open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("closed")
}
