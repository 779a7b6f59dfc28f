// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/plan"
)

// TestDiagnose checks the one line said when no backend can attach, on
// made-up hosts: the first cause the user can remove, in diagnose's order,
// never cilium/ebpf's MEMLOCK hint.
func TestDiagnose(t *testing.T) {
	const all = 1<<unix.CAP_BPF | 1<<unix.CAP_PERFMON
	const identity = "0 0 4294967295"
	v618 := plan.KernelVersion{Major: 6, Minor: 18}
	// The backends' errors on a host like the one trawl is developed on:
	// tracing programs refused with EPERM, no kprobes, no fprobe.
	eperm := fmt.Errorf("load TraceFEntry program: program probe: load program: %w (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", unix.EPERM)
	lacks := func(what string) error { return fmt.Errorf("kernel built without %s: %w", what, ebpf.ErrNotSupported) }
	refusing := []backend.Refusal{
		{Backend: backend.NameFentry, Err: eperm},
		{Backend: backend.NameFsession, Err: lacks("fsession")},
		{Backend: backend.NameKprobe, Err: lacks("CONFIG_KPROBES")},
		{Backend: backend.NameKprobeMulti, Err: lacks("CONFIG_FPROBE")},
	}
	noTracefs := backend.Refusal{Backend: backend.NameKprobe, Err: fmt.Errorf("attach: %w, through which ...", features.ErrNoTracefs)}
	root := hostFacts{caps: all, version: v618, seccomp: "0", uidMap: identity, btf: true}
	for _, tc := range []struct {
		name     string
		facts    hostFacts
		refusals []backend.Refusal
		named    bool
		want     string
		cause    error
	}{
		{
			name:     "tracefs not mounted, where kprobes need it",
			facts:    root,
			refusals: []backend.Refusal{refusing[0], noTracefs},
			want:     "tracefs is not mounted, and the kprobe backend needs it on this kernel, which has no kprobe PMU: mount it (mount -t tracefs tracefs /sys/kernel/tracing)",
			cause:    features.ErrNoTracefs,
		},
		{
			name:     "EPERM as root, securityfs not mounted",
			facts:    root,
			refusals: refusing,
			want:     "no privileges for BPF tracing: refused by a security policy: root has the capabilities, and no seccomp filter (Seccomp: 0 in /proc/self/status) or user namespace (/proc/self/uid_map is the identity) is in the way, so lockdown or an LSM refused: to tell which, read /sys/kernel/security/lockdown and lsm (mount -t securityfs securityfs /sys/kernel/security first)",
			cause:    ErrSecurityPolicy,
		},
		{
			name:     "EPERM under a seccomp filter",
			facts:    hostFacts{caps: all, version: v618, seccomp: "2", uidMap: identity, btf: true},
			refusals: refusing,
			want:     "no privileges for BPF tracing: refused by a security policy: a seccomp filter (Seccomp: 2 in /proc/self/status), as containers have, blocks bpf(): run trawl on the host, or allow bpf() and perf_event_open() in the container's seccomp profile",
			cause:    ErrSecurityPolicy,
		},
		{
			name:     "EPERM in a user namespace",
			facts:    hostFacts{caps: all, version: v618, seccomp: "0", uidMap: "0 1000 1", btf: true},
			refusals: refusing,
			want:     `no privileges for BPF tracing: refused by a security policy: trawl runs in a user namespace (/proc/self/uid_map is "0 1000 1"), whose capabilities do not count for BPF tracing: run it in the initial one, on the host`,
			cause:    ErrSecurityPolicy,
		},
		{
			name:     "EPERM under lockdown",
			facts:    hostFacts{caps: all, version: v618, seccomp: "0", uidMap: identity, lockdown: "none integrity [confidentiality]", btf: true},
			refusals: refusing,
			want:     "no privileges for BPF tracing: kernel lockdown: the kernel is locked down for confidentiality (/sys/kernel/security/lockdown), which keeps BPF programs from reading kernel memory",
			cause:    ErrLockdown,
		},
		{
			name:     "missing capabilities",
			facts:    hostFacts{uid: 65534, version: v618, seccomp: "0", uidMap: identity, btf: true},
			refusals: refusing,
			want:     "no privileges for BPF tracing: trawl needs root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8): running as uid 65534 without CAP_BPF and CAP_PERFMON",
			cause:    ErrNoCapabilities,
		},
		{
			name:     "no BTF",
			facts:    hostFacts{caps: all, version: v618},
			refusals: []backend.Refusal{{Backend: backend.NameFentry, Err: lacks("BTF")}, refusing[2]},
			want:     "kernel BTF not found (the kernel needs CONFIG_DEBUG_INFO_BTF=y, or --btf FILE to read it from a file): /sys/kernel/btf/vmlinux is missing",
			cause:    kernel.ErrNoBTF,
		},
		{
			name:     "too old",
			facts:    hostFacts{caps: all, version: plan.KernelVersion{Major: 5, Minor: 4}, btf: true},
			refusals: []backend.Refusal{{Backend: backend.NameKprobe, Err: errors.New("attach: invalid argument")}, refusing[1]},
			want:     "kernel too old: trawl needs Linux 5.10 or newer, this is 5.4",
			cause:    features.ErrKernelTooOld,
		},
		{
			name:  "perf events for CAP_SYS_ADMIN only",
			facts: hostFacts{caps: all, version: plan.KernelVersion{Major: 5, Minor: 10}, btf: true},
			refusals: []backend.Refusal{
				{Backend: backend.NameKprobe, Err: fmt.Errorf("attach: %w: kernel.perf_event_paranoid is 3 (%w)", features.ErrPerfParanoid, unix.EACCES)},
				refusing[1],
			},
			want:  "kprobe backend: attach: perf events need CAP_SYS_ADMIN here: kernel.perf_event_paranoid is 3 (permission denied)",
			cause: features.ErrPerfParanoid,
		},
		{
			name:     "the backend named lacks a feature",
			facts:    root,
			refusals: refusing[1:2],
			named:    true,
			want:     "fsession backend: kernel built without fsession: not supported",
			cause:    ebpf.ErrNotSupported,
		},
		{
			name:     "every backend lacks a feature",
			facts:    root,
			refusals: refusing[1:],
			want:     "no backend can attach on this kernel: it lacks what each needs (trawl features says what)",
			cause:    ebpf.ErrNotSupported,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.facts
			f.unavailable = &backend.Unavailable{Named: tc.named, Refusals: tc.refusals}
			err := f.diagnose()
			if err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
			if !errors.Is(err, ErrNoBackend) || !errors.Is(err, tc.cause) {
				t.Errorf("error does not match ErrNoBackend and %v", tc.cause)
			}
			if strings.Contains(err.Error(), "MEMLOCK") {
				t.Error("the MEMLOCK hint is back")
			}
		})
	}
}
