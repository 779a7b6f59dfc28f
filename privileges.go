// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// ErrNoPrivileges is returned when the kernel does not let trawl load or
// attach its BPF programs. The error also matches one of its causes:
// ErrNoCapabilities, ErrLockdown, ErrMemlock or ErrSecurityPolicy.
var ErrNoPrivileges = errors.New("no privileges for BPF tracing")

// The causes of ErrNoPrivileges.
var (
	// ErrNoCapabilities: the process lacks the capabilities BPF tracing
	// programs need. Open returns it before loading anything.
	ErrNoCapabilities = errors.New("trawl needs root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8)")
	// ErrLockdown: the kernel is locked down
	// (/sys/kernel/security/lockdown), often because of Secure Boot.
	ErrLockdown = errors.New("kernel lockdown")
	// ErrMemlock: before Linux 5.11 the kernel counts BPF memory against
	// the locked memory limit (ulimit -l), and raising it needs
	// CAP_SYS_RESOURCE.
	ErrMemlock = errors.New("locked memory limit too low")
	// ErrSecurityPolicy: the process has the capabilities, yet a policy
	// refused: an LSM (SELinux, AppArmor, BPF LSM), a seccomp filter or a
	// user namespace.
	ErrSecurityPolicy = errors.New("refused by a security policy")
)

// privilegeError is ErrNoPrivileges with its cause, the facts behind it,
// and the kernel's refusal (nil when trawl refuses before asking).
type privilegeError struct {
	cause  error
	detail string
	err    error
}

func (e *privilegeError) Error() string {
	msg := fmt.Sprintf("%v: %v: %s", ErrNoPrivileges, e.cause, e.detail)
	if e.err != nil {
		msg += " (" + e.err.Error() + ")"
	}
	return msg
}

func (e *privilegeError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrNoPrivileges, e.cause}
	}
	return []error{ErrNoPrivileges, e.cause, e.err}
}

// privilegeFacts are what tells the causes of EPERM apart.
// livePrivilegeFacts reads them; tests make them up.
type privilegeFacts struct {
	uid  int
	caps uint64 // effective capabilities, bit n for capability n
	// version is the running kernel's, zero when unknown.
	version plan.KernelVersion
	// lockdown is /sys/kernel/security/lockdown, e.g. "none [integrity]
	// confidentiality", "" when unreadable; lsm is
	// /sys/kernel/security/lsm, the active LSMs.
	lockdown, lsm string
	// seccomp reports whether the process runs under a seccomp filter.
	seccomp bool
	// memlock is the soft RLIMIT_MEMLOCK in bytes.
	memlock uint64
}

// livePrivilegeFacts reads the facts of this process and kernel. A fact
// that cannot be read stays zero.
func livePrivilegeFacts() privilegeFacts {
	f := privilegeFacts{uid: os.Geteuid()}
	f.caps = kernel.EffectiveCaps()
	f.version, _ = plan.HostKernel()
	f.lockdown = readTrimmed("/sys/kernel/security/lockdown")
	f.lsm = readTrimmed("/sys/kernel/security/lsm")
	for line := range strings.Lines(readTrimmed("/proc/self/status")) {
		if mode, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			f.seccomp = strings.TrimSpace(mode) == "2"
		}
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
		f.memlock = lim.Cur
	}
	return f
}

// readTrimmed returns a file's contents without surrounding space, ""
// when it cannot be read.
func readTrimmed(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func (f privilegeFacts) has(c int) bool { return f.caps&(1<<c) != 0 }

// checkCapabilities returns ErrNoCapabilities unless the process may load
// and attach tracing programs.
func (f privilegeFacts) checkCapabilities() error {
	if missing := f.missingCapabilities(); missing != "" {
		return &privilegeError{cause: ErrNoCapabilities, detail: missing}
	}
	return nil
}

// missingCapabilities says which of CAP_BPF and CAP_PERFMON (5.8) the
// process lacks, "" when none; CAP_SYS_ADMIN stands in for either.
func (f privilegeFacts) missingCapabilities() string {
	var missing []string
	for _, c := range []struct {
		n    int
		name string
	}{{unix.CAP_BPF, "CAP_BPF"}, {unix.CAP_PERFMON, "CAP_PERFMON"}} {
		if !f.has(c.n) && !f.has(unix.CAP_SYS_ADMIN) {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	who := "root"
	if f.uid != 0 {
		who = fmt.Sprintf("uid %d", f.uid)
	}
	return fmt.Sprintf("running as %s without %s", who, strings.Join(missing, " and "))
}

// explain says why the kernel refused with err, an EPERM.
func (f privilegeFacts) explain(err error) error {
	if missing := f.missingCapabilities(); missing != "" {
		return &privilegeError{ErrNoCapabilities, missing, err}
	}
	mode := lockdownMode(f.lockdown)
	if mode == "confidentiality" {
		return &privilegeError{ErrLockdown, "the kernel is locked down for confidentiality (/sys/kernel/security/lockdown), which keeps BPF programs from reading kernel memory", err}
	}
	if f.version != (plan.KernelVersion{}) && !f.version.AtLeast(5, 11) && f.memlock != unix.RLIM_INFINITY {
		detail := fmt.Sprintf("kernels before 5.11 (this is %s) count BPF memory against it; it is %d KB and trawl could not raise it (that needs CAP_SYS_RESOURCE): raise it with ulimit -l", f.version, f.memlock>>10)
		return &privilegeError{ErrMemlock, detail, err}
	}
	if mode == "integrity" {
		return &privilegeError{ErrLockdown, "the kernel is locked down for integrity (/sys/kernel/security/lockdown), often by Secure Boot, and some distribution kernels refuse BPF tracing then", err}
	}
	var who []string
	if f.seccomp {
		who = append(who, "the seccomp filter this process runs under (containers block bpf() with one)")
	}
	lsm := "an LSM (SELinux, AppArmor, BPF LSM)"
	if f.lsm != "" {
		lsm = "an LSM (active: " + f.lsm + ")"
	}
	who = append(who, lsm, "a user namespace (capabilities in one do not count)")
	return &privilegeError{ErrSecurityPolicy, "the process has the capabilities, so the refusal came from " + strings.Join(who, ", or "), err}
}

// lockdownMode returns the bracketed mode of a lockdown file, e.g.
// "integrity" for "none [integrity] confidentiality", "" without one.
func lockdownMode(lockdown string) string {
	_, after, ok := strings.Cut(lockdown, "[")
	mode, _, closed := strings.Cut(after, "]")
	if !ok || !closed || mode == "none" {
		return ""
	}
	return mode
}

// explainPermission returns err with its cause when it is an EPERM from
// the kernel, else err unchanged.
func explainPermission(err error) error {
	if !errors.Is(err, unix.EPERM) {
		return err
	}
	return livePrivilegeFacts().explain(err)
}
