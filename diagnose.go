// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/plan"
)

// ErrNoBackend is returned when no backend can attach on the running
// kernel, or not the one Config.Backend names. The error says in one
// line the first cause the user can remove, and matches it too: among
// others ErrNoPrivileges (with its cause). trawl --debug and trawl
// features say why each backend cannot attach.
var ErrNoBackend = errors.New("no backend can attach on this kernel")

// minKernel is the oldest kernel trawl runs on: the ring buffer is 5.8,
// the classic kprobe backend 5.10.
var minKernel = plan.KernelVersion{Major: 5, Minor: 10}

// explainUnavailable says in one line why no backend can attach, u, on
// this host, and logs each backend's reason (trawl --debug).
func explainUnavailable(u *backend.Unavailable) error {
	for _, r := range u.Refusals {
		slog.Debug("backend cannot attach", "backend", r.Backend, "err", features.WithoutMemlockHint(r.Err))
	}
	f := liveHostFacts()
	f.unavailable = u
	return f.diagnose()
}

// diagnose says in one line why no backend can attach (f.unavailable):
// the first of these causes that holds, each the user can remove:
// tracefs not mounted, where the kprobe backend needs it; an EPERM, or
// missing capabilities (see explain); no kernel BTF; a kernel older than
// minKernel; another refusal than a missing feature (a sysctl, say);
// else what the kernel lacks.
func (f hostFacts) diagnose() error {
	u := f.unavailable
	cause := func() error {
		if r := u.First(features.ErrNoTracefs); r != nil {
			return fmt.Errorf("%w, and the %s backend needs it on this kernel, which has no kprobe PMU: mount it (mount -t tracefs tracefs /sys/kernel/tracing)", features.ErrNoTracefs, r.Backend)
		}
		if u.First(unix.EPERM) != nil || f.missingCapabilities() != "" {
			return f.explain(nil)
		}
		if !f.btf {
			return fmt.Errorf("%w: /sys/kernel/btf/vmlinux is missing", kernel.ErrNoBTF)
		}
		if f.version != (plan.KernelVersion{}) && !f.version.AtLeast(minKernel.Major, minKernel.Minor) {
			return fmt.Errorf("%w: trawl needs Linux %s or newer, this is %s", features.ErrKernelTooOld, minKernel, f.version)
		}
		for _, r := range u.Refusals {
			if !errors.Is(r.Err, ebpf.ErrNotSupported) {
				return fmt.Errorf("%s backend: %w", r.Backend, features.WithoutMemlockHint(r.Err))
			}
		}
		if u.Named {
			return u
		}
		return fmt.Errorf("%w: it lacks what each needs (trawl features says what)", ErrNoBackend)
	}()
	return &noBackendError{cause: cause, unavailable: u}
}

// noBackendError is ErrNoBackend with the cause diagnose found; it also
// matches every backend's error.
type noBackendError struct {
	cause       error
	unavailable *backend.Unavailable
}

func (e *noBackendError) Error() string { return e.cause.Error() }

func (e *noBackendError) Unwrap() []error {
	return []error{ErrNoBackend, e.cause, e.unavailable}
}
