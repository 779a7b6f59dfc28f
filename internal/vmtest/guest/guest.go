// SPDX-License-Identifier: Apache-2.0

// Package guest holds what the test bed's host runner and its guest init
// share: the run specification, the names of the virtio-serial ports, and
// helpers for tests that must run inside a guest.
package guest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// SpecPath is where the runner puts the run specification in the per-run
// initramfs.
const SpecPath = "/run/vmtest/spec.json"

// ModulesList is the file in the kernel's base initramfs that lists the
// module files the init loads, one a line, dependencies first.
const ModulesList = "/etc/trawl/modules"

// SpareModule is a kernel module file (dummy, the dummy network device) in
// the base initramfs that the init does not load: for tests of a module
// loaded while trawl is not running. Empty where the kernel has dummy
// built in.
const SpareModule = "/lib/modules/spare/dummy.ko"

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
	// ReadOnly are further host directories, mounted read-only at their
	// host paths (9p tags "ro0", "ro1", ...).
	ReadOnly []string `json:"read_only,omitempty"`
	// Hung is when, by the wall clock, the init prints the kernel stacks
	// of the tasks that are blocked and of the running CPUs to the
	// console, so that a guest the runner kills for running out of time
	// says where it hung; the zero time for never. (The guest's clock is
	// the host's: QEMU's RTC starts at the host's time.)
	Hung time.Time `json:"hung,omitempty"`
}

// Kernel returns the test bed kernel this process runs on, or "" outside a
// guest.
func Kernel() string { return os.Getenv(KernelEnv) }

// BpftraceEnv names the environment variable that gives a process inside
// a guest the directory where Debian's bpftrace and its libraries are
// unpacked (`vmrun -bpftrace` sets it).
const BpftraceEnv = "TRAWL_BPFTRACE"

// BpftraceCommand returns the command line that runs the bpftrace unpacked
// under root for arch (see DebianCommand).
func BpftraceCommand(root, arch string) ([]string, error) {
	return DebianCommand(root, arch, "bpftrace")
}

// PrometheusEnv names the environment variable that gives a process inside
// a guest the directory where Debian's prometheus and its libraries are
// unpacked (`vmrun -prometheus` sets it).
const PrometheusEnv = "TRAWL_PROMETHEUS"

// Prometheus returns the command lines that run Debian's prometheus
// server and promtool in this guest, or an error saying why there are
// none.
func Prometheus() (server, promtool []string, err error) {
	root := os.Getenv(PrometheusEnv)
	if root == "" {
		return nil, nil, fmt.Errorf("no prometheus in this guest: %s is not set (`vmrun -prometheus` shares Debian's)", PrometheusEnv)
	}
	if server, err = DebianCommand(root, runtime.GOARCH, "prometheus"); err != nil {
		return nil, nil, err
	}
	promtool, err = DebianCommand(root, runtime.GOARCH, "promtool")
	return server, promtool, err
}

// CoreutilsEnv names the environment variable that gives a process inside
// a guest the directory where Debian's coreutils and libc are unpacked
// (`vmrun -coreutils` sets it).
const CoreutilsEnv = "TRAWL_COREUTILS"

// Coreutils returns the command line that runs Debian's command name of
// coreutils (cat, a stripped C program linked with libc) in this guest,
// or an error saying why there is none.
func Coreutils(name string) ([]string, error) {
	root := os.Getenv(CoreutilsEnv)
	if root == "" {
		return nil, fmt.Errorf("no coreutils in this guest: %s is not set (`vmrun -coreutils` shares Debian's)", CoreutilsEnv)
	}
	return DebianCommand(root, runtime.GOARCH, name)
}

// OtelcolEnv names the environment variable that gives a process inside a
// guest the path of the test bed's OpenTelemetry Collector (`vmrun
// -otelcol` sets it).
const OtelcolEnv = "TRAWL_OTELCOL"

// Otelcol returns the path of the OpenTelemetry Collector in this guest,
// or an error saying why there is none.
func Otelcol() (string, error) {
	bin := os.Getenv(OtelcolEnv)
	if bin == "" {
		return "", fmt.Errorf("no OpenTelemetry Collector in this guest: %s is not set (`vmrun -otelcol` builds one)", OtelcolEnv)
	}
	return bin, nil
}

// DebianCommand returns the command line that runs the command name of a
// Debian package unpacked under root for arch: its binary in usr/bin (or
// bin), through the dynamic loader and the libraries unpacked with it,
// since guests have no libc of their own.
func DebianCommand(root, arch, name string) ([]string, error) {
	var triplet, loader string
	switch arch {
	case "amd64":
		triplet, loader = "x86_64-linux-gnu", "ld-linux-x86-64.so.2"
	case "arm64":
		triplet, loader = "aarch64-linux-gnu", "ld-linux-aarch64.so.1"
	default:
		return nil, fmt.Errorf("no %s for %s in the test bed", name, arch)
	}
	lib := filepath.Join(root, "lib", triplet)
	bin := filepath.Join(root, "usr", "bin", name)
	if _, err := os.Stat(bin); err != nil {
		// Some packages (bookworm's coreutils) keep theirs in /bin.
		if _, err := os.Stat(filepath.Join(root, "bin", name)); err == nil {
			bin = filepath.Join(root, "bin", name)
		}
	}
	return []string{
		filepath.Join(lib, loader),
		"--library-path", lib + ":" + filepath.Join(root, "usr", "lib", triplet),
		bin,
	}, nil
}

// Bpftrace returns the command line that runs bpftrace in this guest, or
// an error saying why there is none.
func Bpftrace() ([]string, error) {
	root := os.Getenv(BpftraceEnv)
	if root == "" {
		return nil, fmt.Errorf("no bpftrace in this guest: %s is not set (`vmrun -bpftrace` shares Debian's)", BpftraceEnv)
	}
	return BpftraceCommand(root, runtime.GOARCH)
}

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

// The guests whose runs of make test are the shortest (the fewest
// backends) take the tests that need one guest, or one of each
// architecture, rather than each kernel: what trawl does alike on every
// kernel (its outputs, its servers, the end of a trace) is checked there
// once, and the newest kernels' runs, with every backend, stay short.
const (
	SpareAmd64 = "amd64-6.1"
	SpareArm64 = "arm64-6.12"
)

// Only skips the test unless it runs in one of the guests named (as
// "amd64-7.3"), saying that what it checks is checked there alone. Tests
// of what does not depend on the kernel call it, to keep make test within
// its time.
func Only(tb testing.TB, what string, kernels ...string) {
	tb.Helper()
	if k := Kernel(); !slices.Contains(kernels, k) {
		tb.Skipf("%s is checked on %s only, to keep make test within the CI budget; this is %s", what, strings.Join(kernels, ", "), k)
	}
}

// NewestOfFamily leaves out of have, a list of backend names a kernel
// can attach with, the per-function backends where the kernel has a newer
// one of their family (fentry where fsession or tracing-multi is, kprobe
// where kprobe-multi or kprobe-session is), with a note for each: the
// guests where they are the best choice test them (fentry on 5.10-6.12,
// kprobe on 5.10 and arm64-6.12), and under emulation the same programs
// and links need not be tested again.
func NewestOfFamily(have []string) (kept, notes []string) {
	kept = slices.Clone(have)
	for _, f := range []struct {
		old   string
		newer []string
	}{
		{"fentry", []string{"fsession", "tracing-multi"}},
		{"kprobe", []string{"kprobe-multi", "kprobe-session"}},
	} {
		if slices.Contains(kept, f.old) && slices.ContainsFunc(f.newer, func(b string) bool { return slices.Contains(kept, b) }) {
			notes = append(notes, fmt.Sprintf("%s: skipped on %s, which has %v: tested where it is the best of its family", f.old, Kernel(), f.newer))
			kept = slices.DeleteFunc(kept, func(b string) bool { return b == f.old })
		}
	}
	return kept, notes
}

// HostOnly skips the test inside a test bed guest. Tests that need
// nothing from the kernel (the command line's parsing, help and usage
// errors) call it: `make unit` runs them on the host, and under emulation
// the guests' time is better spent on what needs a kernel.
func HostOnly(tb testing.TB) {
	tb.Helper()
	if k := Kernel(); k != "" {
		tb.Skipf("needs no kernel: runs on the host (make unit), not in the %s guest", k)
	}
}

// EnabledFunctions counts the functions ftrace has patched, from
// tracefs's enabled_functions: after a trace ends it must be back to its
// count from before.
func EnabledFunctions() (int, error) {
	b, err := os.ReadFile("/sys/kernel/tracing/enabled_functions")
	if err != nil {
		return 0, err
	}
	return bytes.Count(b, []byte("\n")), nil
}
