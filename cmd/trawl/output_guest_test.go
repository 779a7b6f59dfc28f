// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestOutputPlantedLate plants a symbolic link where -o names a file
// that did not exist when trawl checked it, before tracing begins: the
// open refuses it, with status 1 and a message saying why, and the file
// the link points to is left as it was.
func TestOutputPlantedLate(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "a link planted at -o", "arm64-5.10")
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	const content = "keep me\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := trawlCmd("-o", out, hotFunc, "--", os.Args[0], hotloopArg, "1s")
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The check comes at once; starting to trace takes seconds here.
	time.Sleep(2 * time.Second)
	if strings.Contains(errOut.String(), "trawl: tracing") {
		killTrawl(cmd)
		<-done
		t.Skip("tracing began before the link could be planted")
	}
	if err := os.Symlink(victim, out); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if status := exitStatus(t, err); status != 1 {
			t.Errorf("status %d, want 1\n%s", status, errOut.String())
		}
	case <-time.After(startLimit + stopLimit):
		killTrawl(cmd)
		t.Fatalf("still running\n%s", errOut.String())
	}
	if stderr := errOut.String(); !strings.Contains(stderr, "trawl: refusing to write "+out+": it is a symbolic link") {
		t.Errorf("stderr:\n%s\nwant: refusing to write %s: it is a symbolic link", stderr, out)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != content {
		t.Errorf("%s changed through the link: %q, %v", victim, b, err)
	}
}

// TestOutputFull writes the trace to a file on a full file system: the
// run ends with status 1, says why, and still prints the summary.
func TestOutputFull(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "a full output file system", "arm64-5.10")
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16k"); err != nil {
		t.Skipf("mount a small tmpfs: %v", err)
	}
	defer syscall.Unmount(dir, 0)
	out := filepath.Join(dir, "out")
	cmd := trawlCmd("-o", out, hotFunc, "--", os.Args[0], hotloopArg, "3s")
	_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 1 {
		t.Errorf("status %d, want 1\n%s", status, stderr)
	}
	if n := strings.Count(stderr, "writing "+out+": no space left on device"); n != 1 || !strings.Contains(stderr, "trawl: writing "+out) {
		t.Errorf("stderr:\n%s\nwant once: trawl: writing %s: no space left on device", stderr, out)
	}
	checkSummary(t, stderr)
}
