// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// inPIDNamespaceArg makes the test binary, started in new PID and mount
// namespaces, mount the namespace's /proc and run trawl with the
// arguments that follow, as `unshare -pf --mount-proc trawl ...` would.
// With targetArg first, it starts openLoopArg on the file named next
// before, and replaces pidPlaceholder in trawl's arguments with its pid.
const (
	inPIDNamespaceArg = "__in_pidns"
	targetArg         = "--target"
	pidPlaceholder    = "{pid}"
)

// openLoopArg makes the test binary print its pid, then open the file
// named next every 50 ms, and start a child that opens it once every
// tenth time, until killed.
const openLoopArg = "__open_loop"

// pidOpenArg makes the test binary print its pid and open the file named
// next.
const pidOpenArg = "__pid_open"

// inPIDNamespace is inPIDNamespaceArg's role.
func inPIDNamespace(args []string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if len(args) > 1 && args[0] == targetArg {
		target, err := os.StartProcess(os.Args[0], []string{os.Args[0], openLoopArg, args[1]},
			&os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}})
		if err != nil {
			return err
		}
		args = args[2:]
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, pidPlaceholder, strconv.Itoa(target.Pid))
		}
	}
	return syscall.Exec(os.Args[0], append([]string{os.Args[0]}, args...), append(os.Environ(), roleEnv+"=trawl"))
}

// openLoop is openLoopArg's role.
func openLoop(path string) {
	fmt.Println(os.Getpid())
	for i := 0; ; i++ {
		opens([]string{path})
		if i%10 == 0 {
			child, err := os.StartProcess(os.Args[0], []string{os.Args[0], opensArg, path}, &os.ProcAttr{})
			if err == nil {
				child.Wait()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runInPIDNamespace runs the test binary with args in new PID and mount
// namespaces, and returns its stdout, stderr and exit status.
func runInPIDNamespace(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := trawlCmd(append([]string{inPIDNamespaceArg}, args...)...)
	cmd.Env = os.Environ() // the wrapper is not trawl
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	return runLimited(t, cmd, startLimit+stopLimit+30*time.Second)
}

// TestPIDNamespace traces from inside a PID namespace, as in a container
// without the host's: the command trawl runs, and a process named with -p
// and its children, are traced, with the pids the namespace gives them;
// no other process is.
func TestPIDNamespace(t *testing.T) {
	guest.Require(t)
	// The translation is one helper on every kernel; the 5.10 guests add
	// the older ways of reading a task's ids (the helpers, and the kprobe
	// backend on arm64).
	guest.Only(t, "tracing from a PID namespace", "amd64-5.10", "arm64-5.10")
	exe := os.Args[0]
	comm := filepath.Base(exe)[:min(15, len(filepath.Base(exe)))]

	t.Run("command", func(t *testing.T) {
		marker := "/trawl-pidns-command"
		out := filepath.Join(t.TempDir(), "trace")
		stdout, stderr, status := runInPIDNamespace(t, "--json", "-o", out, "do_sys_openat2", "--", exe, pidOpenArg, marker)
		if status != 0 {
			t.Fatalf("status %d\n%s", status, stderr)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(stdout))
		if err != nil {
			t.Fatalf("the command printed %q, not its pid\nstderr:\n%s", stdout, stderr)
		}
		// The opens are told by pid, not by their file name: arm64-5.10
		// has no prototype of do_sys_openat2 to read it by.
		calls := callsIn(t, out)
		for _, c := range calls {
			if c.PID != uint32(pid) || c.Comm != comm {
				t.Errorf("a call of pid %d (%s), not of the command, pid %d in the namespace: %+v", c.PID, c.Comm, pid, c)
			}
		}
		if len(calls) == 0 {
			t.Errorf("the command's open of %s was not traced\nstderr:\n%s", marker, stderr)
		}
	})

	t.Run("pid", func(t *testing.T) {
		marker := "/trawl-pidns-target"
		out := filepath.Join(t.TempDir(), "trace")
		stdout, stderr, status := runInPIDNamespace(t, targetArg, marker, "--json", "-o", out, "-p", pidPlaceholder, "--duration", "10s", "do_sys_openat2")
		if status != 0 {
			t.Fatalf("status %d\n%s", status, stderr)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(stdout))
		if err != nil {
			t.Fatalf("the target printed %q, not its pid\nstderr:\n%s", stdout, stderr)
		}
		byTarget, byChildren := 0, map[uint32]bool{}
		for _, c := range callsIn(t, out) {
			if c.Comm != comm {
				t.Errorf("a call of another program: %+v", c)
				continue
			}
			if c.PID == uint32(pid) {
				byTarget++
			} else {
				byChildren[c.PID] = true
			}
		}
		if byTarget == 0 || len(byChildren) == 0 {
			t.Errorf("opens: %d by the target (pid %d), by %d children; want some of each\nstderr:\n%s", byTarget, pid, len(byChildren), stderr)
		}
		for child := range byChildren {
			if child == 0 || child > 1000 {
				t.Errorf("a child shown with pid %d, not its pid in the namespace", child)
			}
		}
	})
}

// callsIn reads the --json output trawl wrote to path.
func callsIn(t *testing.T, path string) []jsonCall {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseCalls(t, string(b))
}
