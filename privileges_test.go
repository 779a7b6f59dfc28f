// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/plan"
)

func TestExplainPermission(t *testing.T) {
	const all = 1<<unix.CAP_BPF | 1<<unix.CAP_PERFMON
	eperm := fmt.Errorf("load program: %w", unix.EPERM)
	v612, v510 := plan.KernelVersion{Major: 6, Minor: 12}, plan.KernelVersion{Major: 5, Minor: 10}
	const identity = "         0          0 4294967295\n"
	for _, tc := range []struct {
		name  string
		facts hostFacts
		cause error
		want  string
	}{
		{
			name:  "unprivileged user",
			facts: hostFacts{uid: 1000, version: v612, memlock: unix.RLIM_INFINITY},
			cause: ErrNoCapabilities,
			want:  "no privileges for BPF tracing: trawl needs root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8): running as uid 1000 without CAP_BPF and CAP_PERFMON (load program: operation not permitted)",
		},
		{
			name:  "CAP_BPF only",
			facts: hostFacts{uid: 1000, caps: 1 << unix.CAP_BPF, version: v612},
			cause: ErrNoCapabilities,
			want:  "no privileges for BPF tracing: trawl needs root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8): running as uid 1000 without CAP_PERFMON (load program: operation not permitted)",
		},
		{
			name:  "confidentiality lockdown",
			facts: hostFacts{caps: all, version: v612, lockdown: "none integrity [confidentiality]", memlock: unix.RLIM_INFINITY},
			cause: ErrLockdown,
			want:  "no privileges for BPF tracing: kernel lockdown: the kernel is locked down for confidentiality (/sys/kernel/security/lockdown), which keeps BPF programs from reading kernel memory (load program: operation not permitted)",
		},
		{
			name:  "integrity lockdown",
			facts: hostFacts{caps: 1 << unix.CAP_SYS_ADMIN, version: v612, lockdown: "none [integrity] confidentiality"},
			cause: ErrLockdown,
			want:  "no privileges for BPF tracing: kernel lockdown: the kernel is locked down for integrity (/sys/kernel/security/lockdown), often by Secure Boot, and some distribution kernels refuse BPF tracing then (load program: operation not permitted)",
		},
		{
			name:  "memlock on 5.10",
			facts: hostFacts{caps: all, version: v510, lockdown: "[none] integrity confidentiality", memlock: 64 << 10},
			cause: ErrMemlock,
			want:  "no privileges for BPF tracing: locked memory limit too low: kernels before 5.11 (this is 5.10) count BPF memory against it; it is 64 KB and trawl could not raise it (that needs CAP_SYS_RESOURCE): raise it with ulimit -l (load program: operation not permitted)",
		},
		{
			name:  "memlock does not matter from 5.11",
			facts: hostFacts{caps: all, version: v612, memlock: 64 << 10, seccomp: "0", uidMap: identity, lockdown: "[none] integrity confidentiality", lsm: "lockdown,capability,apparmor"},
			cause: ErrSecurityPolicy,
			want:  "no privileges for BPF tracing: refused by a security policy: root has the capabilities, and no seccomp filter (Seccomp: 0 in /proc/self/status), user namespace (/proc/self/uid_map is the identity) or lockdown (none in /sys/kernel/security/lockdown) is in the way, so an LSM (active: lockdown,capability,apparmor) refused: its policy or audit log says why (load program: operation not permitted)",
		},
		{
			name:  "seccomp",
			facts: hostFacts{caps: all, version: v612, seccomp: "2", uidMap: identity, memlock: unix.RLIM_INFINITY},
			cause: ErrSecurityPolicy,
			want:  "no privileges for BPF tracing: refused by a security policy: a seccomp filter (Seccomp: 2 in /proc/self/status), as containers have, blocks bpf(): run trawl on the host, or allow bpf() and perf_event_open() in the container's seccomp profile (load program: operation not permitted)",
		},
		{
			name:  "user namespace",
			facts: hostFacts{caps: all, version: v612, seccomp: "0", uidMap: "0 100000 65536\n", memlock: unix.RLIM_INFINITY},
			cause: ErrSecurityPolicy,
			want:  `no privileges for BPF tracing: refused by a security policy: trawl runs in a user namespace (/proc/self/uid_map is "0 100000 65536"), whose capabilities do not count for BPF tracing: run it in the initial one, on the host (load program: operation not permitted)`,
		},
		{
			name:  "securityfs not mounted",
			facts: hostFacts{caps: all, version: v612, seccomp: "0", uidMap: identity},
			cause: ErrSecurityPolicy,
			want:  "no privileges for BPF tracing: refused by a security policy: root has the capabilities, and no seccomp filter (Seccomp: 0 in /proc/self/status) or user namespace (/proc/self/uid_map is the identity) is in the way, so lockdown or an LSM refused: to tell which, read /sys/kernel/security/lockdown and lsm (mount -t securityfs securityfs /sys/kernel/security first) (load program: operation not permitted)",
		},
		{
			name:  "kernel without lockdown",
			facts: hostFacts{uid: 1000, caps: all, version: v612, seccomp: "0", uidMap: identity, lsm: "capability,selinux"},
			cause: ErrSecurityPolicy,
			want:  "no privileges for BPF tracing: refused by a security policy: uid 1000 has the capabilities, and no seccomp filter (Seccomp: 0 in /proc/self/status), user namespace (/proc/self/uid_map is the identity) or lockdown (not among the active LSMs) is in the way, so an LSM (active: capability,selinux) refused: its policy or audit log says why (load program: operation not permitted)",
		},
		{
			name:  "nothing known",
			facts: hostFacts{caps: all},
			cause: ErrSecurityPolicy,
			want:  "no privileges for BPF tracing: refused by a security policy: root has the capabilities, so a seccomp filter, a user namespace, lockdown or an LSM refused: to tell which, read the Seccomp field of /proc/self/status, /proc/self/uid_map, /sys/kernel/security/lockdown and lsm (mount -t securityfs securityfs /sys/kernel/security first) (load program: operation not permitted)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.facts.explain(eperm)
			if err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
			for _, c := range []error{ErrNoCapabilities, ErrLockdown, ErrMemlock, ErrSecurityPolicy} {
				if errors.Is(err, c) != (c == tc.cause) {
					t.Errorf("errors.Is(err, %v) = %v", c, c != tc.cause)
				}
			}
			if !errors.Is(err, ErrNoPrivileges) || !errors.Is(err, unix.EPERM) {
				t.Error("error does not match ErrNoPrivileges and EPERM")
			}
		})
	}
}

func TestCheckCapabilities(t *testing.T) {
	for _, tc := range []struct {
		caps uint64
		ok   bool
	}{
		{0, false},
		{1 << unix.CAP_BPF, false},
		{1 << unix.CAP_PERFMON, false},
		{1<<unix.CAP_BPF | 1<<unix.CAP_PERFMON, true},
		{1 << unix.CAP_SYS_ADMIN, true},
		{1<<unix.CAP_SYS_ADMIN | 1<<unix.CAP_BPF, true},
	} {
		err := hostFacts{caps: tc.caps}.checkCapabilities()
		if (err == nil) != tc.ok || err != nil && (!errors.Is(err, ErrNoCapabilities) || !errors.Is(err, ErrNoPrivileges) || errors.Is(err, unix.EPERM)) {
			t.Errorf("caps %#x: got %v, want ok=%v", tc.caps, err, tc.ok)
		}
	}
}

func TestLockdownMode(t *testing.T) {
	for in, want := range map[string]string{
		"[none] integrity confidentiality": "",
		"none [integrity] confidentiality": "integrity",
		"none integrity [confidentiality]": "confidentiality",
		"":                                 "",
		"none [integrity":                  "",
	} {
		if got := lockdownMode(in); got != want {
			t.Errorf("lockdownMode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExplainPermissionWithoutMemlockHint(t *testing.T) {
	err := explainPermission(fmt.Errorf("load program: %w (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", unix.EPERM))
	if strings.Contains(err.Error(), "MEMLOCK") || !strings.HasSuffix(err.Error(), "(load program: operation not permitted)") {
		t.Errorf("got %v, want it ending in the EPERM without cilium/ebpf's hint", err)
	}
}

func TestExplainPermissionLeavesOtherErrors(t *testing.T) {
	err := fmt.Errorf("load program: %w", unix.EINVAL)
	if got := explainPermission(err); got != err {
		t.Errorf("got %v, want %v unchanged", got, err)
	}
}
