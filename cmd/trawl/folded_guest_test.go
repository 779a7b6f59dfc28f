// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestFoldedStats traces a command that calls getppid a known number of
// times with --stats -f folded --stack: the kernel counts the calls by
// stack, the folded lines of getppid add up to exactly those calls, and
// their stacks lead from the command's Go code, through the kernel's
// entry, to the function.
func TestFoldedStats(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "--stats -f folded", "amd64-7.3", "arm64-7.3")
	const getppids = 5000
	exe := filepath.Base(os.Args[0])
	out := filepath.Join(t.TempDir(), "folded")
	start := time.Now()
	cmd := trawlCmd("--duration", "3s", "--stats", "-f", "folded", "--stack", "-o", out, hotFunc, "--",
		os.Args[0], callsArg, strconv.Itoa(getppids), "0")
	_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	t.Logf("ended after %v, status %d", time.Since(start).Round(time.Millisecond), status)
	if status != 128+int(syscall.SIGTERM) {
		t.Fatalf("status %d, want %d (the command's: SIGTERM)\n%s", status, 128+int(syscall.SIGTERM), stderr)
	}
	folded, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("folded:\n%s", folded)
	var sum uint64
	var goFrames, kernelFrames bool
	for _, line := range strings.Split(strings.TrimSuffix(string(folded), "\n"), "\n") {
		stack, count, ok := strings.Cut(line, " ")
		n, err := strconv.ParseUint(count, 10, 64)
		if !ok || err != nil {
			t.Fatalf("line %q is not FRAME;...;FRAME COUNT", line)
		}
		frames := strings.Split(stack, ";")
		if !strings.HasSuffix(frames[len(frames)-1], "sys_getppid") {
			continue
		}
		sum += n
		if strings.Contains(stack, "[stack-") {
			t.Errorf("stack lost or not counted: %q", line)
		}
		for i, f := range frames[:len(frames)-1] {
			goFrames = goFrames || strings.HasPrefix(f, exe+":main.")
			// The kernel's frames follow the user frames, named
			// without a module.
			kernelFrames = kernelFrames || i > 0 && !strings.Contains(f, ":") && strings.Contains(frames[i-1], ":")
		}
	}
	if sum != getppids {
		t.Errorf("the getppid lines count %d calls, want %d\nstderr:\n%s", sum, getppids, stderr)
	}
	if !goFrames || !kernelFrames {
		t.Errorf("want the command's Go code (%s:main.*) then the kernel's frames under getppid (found: %v, %v)", exe, goFrames, kernelFrames)
	}
}
