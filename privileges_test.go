// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/plan"
)

func TestExplainPermission(t *testing.T) {
	const all = 1<<unix.CAP_BPF | 1<<unix.CAP_PERFMON
	eperm := fmt.Errorf("load program: %w", unix.EPERM)
	v612, v510 := plan.KernelVersion{Major: 6, Minor: 12}, plan.KernelVersion{Major: 5, Minor: 10}
	for _, tc := range []struct {
		name  string
		facts privilegeFacts
		cause error
		want  string
	}{
		{
			name:  "unprivileged user",
			facts: privilegeFacts{uid: 1000, version: v612, memlock: unix.RLIM_INFINITY},
			cause: ErrNoCapabilities,
			want:  "no privileges for BPF tracing: trawl needs root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8): running as uid 1000 without CAP_BPF and CAP_PERFMON (load program: operation not permitted)",
		},
		{
			name:  "CAP_BPF only",
			facts: privilegeFacts{uid: 1000, caps: 1 << unix.CAP_BPF, version: v612},
			cause: ErrNoCapabilities,
			want:  "no privileges for BPF tracing: trawl needs root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8): running as uid 1000 without CAP_PERFMON (load program: operation not permitted)",
		},
		{
			name:  "confidentiality lockdown",
			facts: privilegeFacts{caps: all, version: v612, lockdown: "none integrity [confidentiality]", memlock: unix.RLIM_INFINITY},
			cause: ErrLockdown,
			want:  "no privileges for BPF tracing: kernel lockdown: the kernel is locked down for confidentiality (/sys/kernel/security/lockdown), which keeps BPF programs from reading kernel memory (load program: operation not permitted)",
		},
		{
			name:  "integrity lockdown",
			facts: privilegeFacts{caps: 1 << unix.CAP_SYS_ADMIN, version: v612, lockdown: "none [integrity] confidentiality"},
			cause: ErrLockdown,
			want:  "no privileges for BPF tracing: kernel lockdown: the kernel is locked down for integrity (/sys/kernel/security/lockdown), often by Secure Boot, and some distribution kernels refuse BPF tracing then (load program: operation not permitted)",
		},
		{
			name:  "memlock on 5.10",
			facts: privilegeFacts{caps: all, version: v510, lockdown: "[none] integrity confidentiality", memlock: 64 << 10},
			cause: ErrMemlock,
			want:  "no privileges for BPF tracing: locked memory limit too low: kernels before 5.11 (this is 5.10) count BPF memory against it; it is 64 KB and trawl could not raise it (that needs CAP_SYS_RESOURCE): raise it with ulimit -l (load program: operation not permitted)",
		},
		{
			name:  "memlock does not matter from 5.11",
			facts: privilegeFacts{caps: all, version: v612, memlock: 64 << 10, lsm: "lockdown,capability,apparmor"},
			cause: ErrSecurityPolicy,
			want:  "no privileges for BPF tracing: refused by a security policy: the process has the capabilities, so the refusal came from an LSM (active: lockdown,capability,apparmor), or a user namespace (capabilities in one do not count) (load program: operation not permitted)",
		},
		{
			name:  "seccomp",
			facts: privilegeFacts{caps: all, version: v612, seccomp: true, memlock: unix.RLIM_INFINITY},
			cause: ErrSecurityPolicy,
			want:  "no privileges for BPF tracing: refused by a security policy: the process has the capabilities, so the refusal came from the seccomp filter this process runs under (containers block bpf() with one), or an LSM (SELinux, AppArmor, BPF LSM), or a user namespace (capabilities in one do not count) (load program: operation not permitted)",
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
		err := privilegeFacts{caps: tc.caps}.checkCapabilities()
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

func TestExplainPermissionLeavesOtherErrors(t *testing.T) {
	err := fmt.Errorf("load program: %w", unix.EINVAL)
	if got := explainPermission(err); got != err {
		t.Errorf("got %v, want %v unchanged", got, err)
	}
}
