// Package guest holds what the test bed's host runner and its guest init
// share: the run specification, the names of the virtio-serial ports, and
// helpers for tests that must run inside a guest.
package guest

import (
	"os"
	"testing"
)

// SpecPath is where the runner puts the run specification in the per-run
// initramfs.
const SpecPath = "/run/trawl/spec.json"

// ModulesList is the file in the kernel's base initramfs that lists the
// module files the init loads, one a line, dependencies first.
const ModulesList = "/etc/trawl/modules"

// Names of the virtio-serial ports the runner creates. The guest init finds
// them through /sys/class/virtio-ports/*/name.
const (
	PortStdout = "trawl.stdout"
	PortStderr = "trawl.stderr"
	PortStatus = "trawl.status"
)

// StartMarker is the console line the init prints once it runs: a kernel
// panic before it is a boot failure, not the binary's doing.
const StartMarker = "trawl-guestinit: started"

// ExitMarker starts the console line the init prints with the command's
// exit status, a fallback for when the status port is missing.
const ExitMarker = "TRAWL-VMTEST-EXIT="

// KernelEnv names the environment variable that tells a process inside a
// guest which test bed kernel it runs on, e.g. "amd64-6.12".
const KernelEnv = "TRAWL_VMTEST_KERNEL"

// Spec tells the guest init what to run.
type Spec struct {
	// Args is the command and its arguments; Args[0] is an absolute path.
	Args []string `json:"args"`
	// Env is the command's environment, as KEY=VALUE.
	Env []string `json:"env"`
	// Dir is the command's working directory.
	Dir string `json:"dir"`
	// Share is where the host's shared directory (9p tag "host0") is
	// mounted; empty for none.
	Share string `json:"share"`
}

// Kernel returns the test bed kernel this process runs on, or "" outside a
// guest.
func Kernel() string { return os.Getenv(KernelEnv) }

// Require skips the test unless it runs as root inside a test bed guest.
// Tests that load BPF programs call it first: the host's kernel refuses BPF
// tracing programs, so they only run through `make vmtest`.
func Require(tb testing.TB) {
	tb.Helper()
	if Kernel() == "" {
		tb.Skip("needs a test bed guest: run it with `make vmtest`")
	}
	if os.Geteuid() != 0 {
		tb.Fatal("test bed guests run tests as root, but this process is not root")
	}
}
