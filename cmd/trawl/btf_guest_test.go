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

// withoutBTFArg as the first argument makes the test binary hide the
// kernel's BTF, then run trawl with the other arguments: it must be
// started in a mount namespace of its own (runWithoutBTF).
const withoutBTFArg = "__without_btf"

// withoutBTF is withoutBTFArg's role: an empty tmpfs over /sys/kernel/btf,
// as on a kernel built without BTF.
func withoutBTF(args []string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := syscall.Mount("tmpfs", "/sys/kernel/btf", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size=4k"); err != nil {
		return fmt.Errorf("mount a tmpfs over /sys/kernel/btf: %w", err)
	}
	return syscall.Exec(os.Args[0], append([]string{os.Args[0]}, args...), append(os.Environ(), roleEnv+"=trawl"))
}

// runWithoutBTF runs trawl with args in a mount namespace where the
// kernel's BTF is hidden, and returns its stdout, stderr and exit status.
func runWithoutBTF(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := trawlCmd(append([]string{withoutBTFArg}, args...)...)
	cmd.Env = os.Environ() // the wrapper is not trawl
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	return runLimited(t, cmd, startLimit+stopLimit+30*time.Second)
}

// TestExternalBTF hides the kernel's BTF from trawl, as on a kernel
// built without it: trawl refuses to trace, saying so; with --btf naming
// a copy of the kernel's BTF it traces opens with a kprobe backend, their
// arguments decoded by name and their returns, following the command's
// children, and refuses fentry; trawl features says where the BTF came
// from.
func TestExternalBTF(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "BTF from a file", "amd64-7.3", guest.SpareArm64)
	skipWithoutPrototype(t, openEntry)
	raw, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "vmlinux.btf")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, missing := os.Args[0], "/trawl-btf-missing"

	start := time.Now()
	_, stderr, status := runWithoutBTF(t, "--json", openEntry, "--", exe, opensArg, missing)
	if status != 1 || !strings.Contains(stderr, "kernel BTF not found") || !strings.Contains(stderr, "--btf FILE") {
		t.Errorf("without BTF: status %d, want 1 and kernel BTF not found:\n%s", status, stderr)
	}

	stdout, stderr, status := runWithoutBTF(t, "features", "--btf", file)
	if status != 0 || !strings.Contains(stdout, "kernel BTF      from file "+file+"\n") {
		t.Errorf("features --btf: status %d, want it to say the BTF is from %s:\n%s\n%s", status, file, stdout, stderr)
	}
	for line := range strings.Lines(stdout) {
		if picks, ok := strings.CutPrefix(line, "auto picks"); ok && (!strings.Contains(picks, "kprobe") || strings.Contains(picks, "fentry") || strings.Contains(picks, "fsession") || strings.Contains(picks, "tracing-multi")) {
			t.Errorf("features --btf: auto picks a trampoline, or no kprobe backend: %s", line)
		}
	}

	stdout, stderr, status = runWithoutBTF(t, "--json", "--btf", file, openEntry, "--", exe, opensArg, missing, exe)
	if status != 0 {
		t.Fatalf("--btf: status %d\n%s", status, stderr)
	}
	if !strings.Contains(stderr, "functions with kprobe") {
		t.Errorf("--btf: not traced with a kprobe backend:\n%s", stderr)
	}
	seen := map[string]jsonCall{}
	for _, c := range parseCalls(t, stdout) {
		if name := c.filename(); name == missing || name == exe {
			seen[name] = c
		}
	}
	if c, ok := seen[missing]; !ok || c.Errno != "ENOENT" {
		t.Errorf("--btf: the open of %s: %+v, want ENOENT by its filename argument:\n%s", missing, c, stdout)
	}
	if c, ok := seen[exe]; !ok || c.Errno != "" || strings.HasPrefix(string(c.Ret), "-") || len(c.Ret) == 0 {
		t.Errorf("--btf: the open of %s: %+v, want a file descriptor:\n%s", exe, c, stdout)
	}

	// The command's children are followed (raw tracepoints, as tp_btf
	// programs need the kernel's own BTF) and forgotten as they exit.
	const children = 20
	_, stderr, status = runWithoutBTF(t, "--btf", file, "--stats", forkloopFunc, "--", exe, forkloopArg, strconv.Itoa(children))
	if status != 0 {
		t.Fatalf("--btf, following children: status %d\n%s", status, stderr)
	}
	if calls := checkSummary(t, stderr); calls < children || strings.Contains(stderr, "children not followed") {
		t.Errorf("--btf: %d calls of execve, want one per child (%d), all followed:\n%s", calls, children, stderr)
	}

	_, stderr, status = runWithoutBTF(t, "-b", "fentry", "--btf", file, openEntry, "--", exe, opensArg, missing)
	if status != 1 || !strings.Contains(stderr, "fentry backend: the kernel has no BTF of its own, which trampolines attach by") {
		t.Errorf("--btf -b fentry: status %d, want 1 and why fentry cannot attach:\n%s", status, stderr)
	}
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}
