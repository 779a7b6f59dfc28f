// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
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
		msg += " (" + features.WithoutMemlockHint(e.err).Error() + ")"
	}
	return msg
}

func (e *privilegeError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrNoPrivileges, e.cause}
	}
	return []error{ErrNoPrivileges, e.cause, e.err}
}

// hostFacts are what tells apart why the kernel refuses trawl: the
// process's privileges, the kernel's policies and version, and, when no
// backend can attach, why each cannot. liveHostFacts reads them; tests
// make them up.
type hostFacts struct {
	uid  int
	caps uint64 // effective capabilities, bit n for capability n
	// version is the running kernel's, zero when unknown.
	version plan.KernelVersion
	// lockdown is /sys/kernel/security/lockdown, e.g. "none [integrity]
	// confidentiality", "" when unreadable (securityfs not mounted);
	// lsm is /sys/kernel/security/lsm, the active LSMs.
	lockdown, lsm string
	// seccomp is the Seccomp field of /proc/self/status: "0" none, "2" a
	// filter, "" unknown.
	seccomp string
	// uidMap is /proc/self/uid_map, "" when unreadable; the initial user
	// namespace's maps every uid to itself.
	uidMap string
	// btf says the kernel has BTF (/sys/kernel/btf/vmlinux), or the
	// process reads it from a file (kernel.UseBTF).
	btf bool
	// memlock is the soft RLIMIT_MEMLOCK in bytes.
	memlock uint64
	// unavailable says why no backend can attach, or not the one named;
	// nil when not asked.
	unavailable *backend.Unavailable
}

// liveHostFacts reads the facts of this process and kernel. A fact that
// cannot be read stays zero.
func liveHostFacts() hostFacts {
	f := hostFacts{uid: os.Geteuid()}
	f.caps = kernel.EffectiveCaps()
	f.version, _ = plan.HostKernel()
	f.lockdown = readTrimmed("/sys/kernel/security/lockdown")
	f.lsm = readTrimmed("/sys/kernel/security/lsm")
	for line := range strings.Lines(readTrimmed("/proc/self/status")) {
		if mode, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			f.seccomp = strings.TrimSpace(mode)
		}
	}
	f.uidMap = readTrimmed("/proc/self/uid_map")
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	f.btf = err == nil || kernel.External() != nil
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

func (f hostFacts) has(c int) bool { return f.caps&(1<<c) != 0 }

// checkCapabilities returns ErrNoCapabilities unless the process may load
// and attach tracing programs.
func (f hostFacts) checkCapabilities() error {
	if missing := f.missingCapabilities(); missing != "" {
		return &privilegeError{cause: ErrNoCapabilities, detail: missing}
	}
	return nil
}

// missingCapabilities says which of CAP_BPF and CAP_PERFMON (5.8) the
// process lacks, "" when none; CAP_SYS_ADMIN stands in for either.
func (f hostFacts) missingCapabilities() string {
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
	return fmt.Sprintf("running as %s without %s", f.who(), strings.Join(missing, " and "))
}

// explain says why the kernel refused with err, an EPERM (nil when
// diagnose found one among the backends' errors).
func (f hostFacts) explain(err error) error {
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
	return &privilegeError{ErrSecurityPolicy, f.policy(), err}
}

// policy says which policy refused a process that has the capabilities:
// a seccomp filter, a user namespace, lockdown or an LSM, or how to tell
// which where the facts do not say.
func (f hostFacts) policy() string {
	if f.seccomp == "2" {
		return "a seccomp filter (Seccomp: 2 in /proc/self/status), as containers have, blocks bpf(): run trawl on the host, or allow bpf() and perf_event_open() in the container's seccomp profile"
	}
	if f.uidMap != "" && !identityMap(f.uidMap) {
		mapping, _, _ := strings.Cut(f.uidMap, "\n")
		return fmt.Sprintf("trawl runs in a user namespace (/proc/self/uid_map is %q), whose capabilities do not count for BPF tracing: run it in the initial one, on the host", strings.Join(strings.Fields(mapping), " "))
	}
	// Each policy is ruled out by a fact read, or suspected, and then
	// said where to look.
	var ruledOut, suspects, look []string
	if f.seccomp == "0" {
		ruledOut = append(ruledOut, "seccomp filter (Seccomp: 0 in /proc/self/status)")
	} else {
		suspects, look = append(suspects, "a seccomp filter"), append(look, "the Seccomp field of /proc/self/status")
	}
	if f.uidMap != "" {
		ruledOut = append(ruledOut, "user namespace (/proc/self/uid_map is the identity)")
	} else {
		suspects, look = append(suspects, "a user namespace"), append(look, "/proc/self/uid_map")
	}
	switch {
	case f.lockdown != "":
		ruledOut = append(ruledOut, "lockdown (none in /sys/kernel/security/lockdown)")
	case f.lsm != "":
		ruledOut = append(ruledOut, "lockdown (not among the active LSMs)")
	default:
		suspects, look = append(suspects, "lockdown"), append(look, "/sys/kernel/security/lockdown and lsm (mount -t securityfs securityfs /sys/kernel/security first)")
	}
	msg := f.who() + " has the capabilities"
	if len(ruledOut) > 0 {
		msg += ", and no " + orList(ruledOut) + " is in the way"
	}
	if len(suspects) == 0 {
		lsm := "an LSM (SELinux, AppArmor, BPF LSM)"
		if f.lsm != "" {
			lsm = "an LSM (active: " + f.lsm + ")"
		}
		return msg + ", so " + lsm + " refused: its policy or audit log says why"
	}
	return msg + ", so " + orList(append(suspects, "an LSM")) + " refused: to tell which, read " + strings.Join(look, ", ")
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// who names the process's user: root, or uid N.
func (f hostFacts) who() string {
	if f.uid == 0 {
		return "root"
	}
	return fmt.Sprintf("uid %d", f.uid)
}

// identityMap reports whether uidMap, as /proc/self/uid_map reads, maps
// every uid to itself, as the initial user namespace does.
func identityMap(uidMap string) bool {
	return strings.Join(strings.Fields(uidMap), " ") == "0 0 4294967295"
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
	return liveHostFacts().explain(err)
}
