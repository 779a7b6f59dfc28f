// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// openWaitArg makes the test binary, a Go program built without cgo,
// open the file named by the next argument from a function of its own,
// then wait openWaitTime before it exits.
const openWaitArg = "__open_wait"

// openWaitTime is how long the openWaitArg command lives after its open:
// what trawl needs to read the call and the process's mappings.
const openWaitTime = 3 * time.Second

//go:noinline
func openWait(path string) {
	if f, err := os.OpenFile(path, os.O_RDONLY, 0); err == nil {
		f.Close()
	}
	time.Sleep(openWaitTime)
}

// TestUserStack traces a Go program's open with --stack (both stacks):
// its user stack names its Go callers, from os.OpenFile out to
// main.main, after its kernel stack.
func TestUserStack(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "--stack=user", "amd64-7.3", "arm64-7.3")
	exe := os.Args[0]
	marker := filepath.Join(t.TempDir(), "ustack-marker")
	out := filepath.Join(t.TempDir(), "trace")
	start := time.Now()
	cmd := trawlCmd("-q", "--json", "--stack", "-o", out, "do_sys_openat2", "--", exe, openWaitArg, marker)
	_, stderr, status := runLimited(t, cmd, startLimit+stopLimit+openWaitTime)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	t.Logf("traced in %v", time.Since(start).Round(time.Millisecond))
	var found bool
	for _, c := range callsIn(t, out) {
		if c.filename() != marker {
			continue
		}
		found = true
		names := make([]string, len(c.UStack))
		for i, f := range c.UStack {
			names[i], _, _ = strings.Cut(f, "+0x")
		}
		t.Logf("user stack: %q", c.UStack)
		if len(c.Stack) == 0 {
			t.Errorf("no kernel stack beside the user stack")
		}
		opened, main := slices.Index(names, "os.OpenFile"), slices.Index(names, "main.main")
		if opened < 0 || main < opened || !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".openWait") }) {
			t.Errorf("the user stack does not lead from os.OpenFile through openWait to main.main: %q", c.UStack)
		}
		for _, f := range c.UStack {
			if strings.HasPrefix(f, "os.OpenFile+") && !strings.HasSuffix(f, " ["+filepath.Base(exe)+"]") {
				t.Errorf("frame %q not named by its binary, %s", f, filepath.Base(exe))
			}
		}
	}
	if !found {
		t.Errorf("the open of %s was not traced\nstderr:\n%s", marker, stderr)
	}
}

// TestUserStackExited reads the call of a process that has exited: its
// user stack still names its Go callers, from the mappings the kernel
// told of while it ran.
func TestUserStackExited(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "--stack=user", "amd64-7.3", "arm64-7.3")
	exe := os.Args[0]
	marker := filepath.Join(t.TempDir(), "ustack-exited")
	sess, err := trawl.Open(t.Context(), trawl.Config{Patterns: []string{"do_sys_openat2"}, UserStack: true, Filter: `filename == "` + marker + `"`})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	cmd := exec.Command(exe, pidOpenArg, marker)
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pid := cmd.Process.Pid
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "maps")); err == nil {
		t.Fatalf("process %d still has its mappings", pid)
	}
	ctx, cancel := context.WithTimeout(t.Context(), stopLimit)
	defer cancel()
	var c trawl.Call
	if err := sess.Read(ctx, &c); err != nil {
		t.Fatalf("the open of %s: %v", marker, err)
	}
	t.Logf("user stack: %q", c.UStack)
	names := make([]string, len(c.UStack))
	for i, f := range c.UStack {
		names[i], _, _ = strings.Cut(f, "+0x")
	}
	if int(c.PID) != pid || !slices.Contains(names, "os.OpenFile") || !slices.Contains(names, "main.main") {
		t.Errorf("call of pid %d (want %d) without os.OpenFile and main.main in its user stack: %q", c.PID, pid, c.UStack)
	}
	if st, err := sess.Stats(); err != nil || st.MissUserStack != 0 {
		t.Errorf("%d user stacks missed (%v)", st.MissUserStack, err)
	}
}

// TestUserStackLibc traces Debian's cat, a stripped C program linked
// with libc, reading a file: its user stack starts in libc, named from
// libc's dynamic symbols, where its read system call is.
func TestUserStackLibc(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "--stack=user", "amd64-7.3", "arm64-7.3")
	cat, err := guest.Coreutils("cat")
	if err != nil {
		t.Skip(err)
	}
	file := filepath.Join(t.TempDir(), "ustack-libc")
	if err := os.WriteFile(file, []byte("read by cat\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "trace")
	args := append([]string{"-q", "--json", "--stack=user", "-o", out, "vfs_read", "--"}, cat...)
	_, stderr, status := runLimited(t, trawlCmd(append(args, file)...), startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	var stacks [][]string
	for _, c := range callsIn(t, out) {
		if len(c.UStack) == 0 {
			continue
		}
		stacks = append(stacks, c.UStack)
		if strings.HasSuffix(c.UStack[0], " [libc.so.6]") {
			t.Logf("user stack: %q", c.UStack)
			return
		}
	}
	t.Errorf("no read's user stack starts with a named frame of libc.so.6: %q\nstderr:\n%s", stacks, stderr)
}
