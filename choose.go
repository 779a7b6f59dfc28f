// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
)

// backendNames lists the names Config.Backend takes, BackendAuto first.
func backendNames() []string {
	names := []string{BackendAuto}
	for _, b := range backend.All() {
		names = append(names, b.Name)
	}
	return names
}

// autoTrampolineMax is the largest selection auto attaches with one
// trampoline program per function (fsession or fentry) when the kernel
// has a kprobe link for all of them at once; see Choose.
const autoTrampolineMax = 20

// autoSessionMax is the largest selection auto attaches with fsession
// rather than a tracing_multi link, whose creation has a fixed cost
// (docs/benchmarks.md, "Choosing a backend").
const autoSessionMax = 8

// probeFunc says whether the running kernel has what a backend needs: nil if
// it has. liveProbe asks the kernel; tests make up kernels.
type probeFunc func(*backend.Backend) error

// liveProbe probes the running kernel for the backend's feature.
func liveProbe(b *backend.Backend) error { return b.Needs() }

// Choose returns the backend named name for the selection, checked with
// probe, and why. For Auto it weighs attach cost, which grows with the
// number of functions N, against per-call cost (measured numbers in the
// README, "Choosing a backend"):
//
//   - For N <= 8, fsession (7.0): one load per function, in parallel,
//     which attaches a few functions faster than a tracing_multi link.
//   - tracing-multi (7.2, x86-64): one verifier run and one link (one per
//     module) for any N, and trampoline per-call cost, the lowest there is.
//   - For N <= 20, one trampoline program per function: fsession (7.0;
//     one load per function, exact pairing), else fentry/fexit (two
//     loads). The loads run in parallel and take well under a second.
//   - For larger N, a kprobe link for all functions at once: kprobe.session
//     (6.10; one program, no exit run for filtered entries), else
//     kprobe.multi (5.18). Attaching stays about constant in N, while
//     per-function trampoline loads grow linearly.
//   - Without either, fsession or fentry, else (before 5.17 without
//     trampolines' argument helpers, arm64 before 6.0) a classic kprobe
//     and kretprobe per function, for as many functions as half the
//     available memory holds (backend.ErrNotEnoughMemory).
//   - With --entry (gated), fentry instead of fsession, which then
//     attaches fentry's programs: an fsession exit runs for every call,
//     fentry's returns at once for a call outside every entry call.
func pickBackend(name string, sel *selector.Selection, gated bool, probe probeFunc) (*backend.Backend, string, error) {
	if name == BackendAuto || name == "" {
		b, why := auto(sel, gated, probe)
		if b == nil {
			return nil, "", noBackend(probe)
		}
		return b, why, nil
	}
	b := backend.Find(name)
	if b == nil {
		return nil, "", fmt.Errorf("unknown backend %q (want %s)", name, strings.Join(backendNames(), ", "))
	}
	if err := probe(b); err != nil {
		return nil, "", fmt.Errorf("%s backend: %w", name, err)
	}
	return b, "chosen by the caller", nil
}

func auto(sel *selector.Selection, gated bool, probe probeFunc) (*backend.Backend, string) {
	n := len(sel.Selected)
	// can reports whether b can attach the selection on this kernel. With
	// --entry (gated), fsession is passed over: it would attach fentry's
	// programs (see backend.Fsession), so fentry names what runs.
	can := func(b *backend.Backend) bool { return probe(b) == nil && !(gated && b == backend.Fsession) }
	switch {
	case n <= autoSessionMax && can(backend.Fsession):
		return backend.Fsession, fmt.Sprintf("%d functions (at most %d): one fsession trampoline program each, faster to attach than a tracing_multi link", n, autoSessionMax)
	case n <= autoSessionMax && gated && can(backend.Fentry):
		return backend.Fentry, fmt.Sprintf("%d functions (at most %d) with --entry: one fentry and one fexit program each, faster to attach than a tracing_multi link", n, autoSessionMax)
	case can(backend.TracingMulti):
		return backend.TracingMulti, fmt.Sprintf("one program and one tracing_multi link for all %d functions, trampoline cost per call", n)
	case n <= autoTrampolineMax && can(backend.Fsession):
		return backend.Fsession, fmt.Sprintf("%d functions (at most %d): one fsession trampoline program each", n, autoTrampolineMax)
	case n <= autoTrampolineMax && can(backend.Fentry):
		return backend.Fentry, fmt.Sprintf("%d functions (at most %d): one fentry and one fexit program each", n, autoTrampolineMax)
	case can(backend.KprobeSession):
		return backend.KprobeSession, fmt.Sprintf("%d functions (more than %d): one kprobe.session program and link for all", n, autoTrampolineMax)
	case can(backend.KprobeMulti):
		return backend.KprobeMulti, fmt.Sprintf("%d functions (more than %d): one kprobe.multi and one kretprobe.multi link for all", n, autoTrampolineMax)
	case can(backend.Fsession):
		return backend.Fsession, fmt.Sprintf("%d functions: no kprobe.multi on this kernel, so one fsession program each", n)
	case can(backend.Fentry):
		return backend.Fentry, fmt.Sprintf("%d functions: no kprobe.multi on this kernel, so one fentry and one fexit program each", n)
	case can(backend.Kprobe):
		return backend.Kprobe, fmt.Sprintf("%d functions: neither kprobe.multi nor fentry on this kernel, so one kprobe and one kretprobe each", n)
	}
	return nil, ""
}

// noBackend says why no backend can attach on this kernel: what each
// lacks, those that only lack a permission first (what the user can
// change).
func noBackend(probe probeFunc) error {
	var lack, refused []string
	for _, b := range backend.All() {
		switch err := probe(b); {
		case errors.Is(err, ebpf.ErrNotSupported):
			lack = append(lack, fmt.Sprintf("%s: %v", b.Name, err))
		case err != nil:
			refused = append(refused, fmt.Sprintf("%s: %v", b.Name, err))
		}
	}
	return fmt.Errorf("no backend can attach on this kernel: %s", strings.Join(append(refused, lack...), "; "))
}

// autoChoice is what Auto picks for selections of a range of sizes.
type autoChoice struct {
	// Min and Max bound the number of functions, Max 0 for no bound.
	Min, Max int
	Backend  *backend.Backend
}

// autoChoices returns what Auto picks for selections of vmlinux functions
// of every size on the kernel probe describes, in ranges of sizes with
// the same pick, smallest first; none when no backend can attach.
func autoChoices(probe probeFunc) []autoChoice {
	var choices []autoChoice
	for _, r := range [][2]int{{1, autoSessionMax}, {autoSessionMax + 1, autoTrampolineMax}, {autoTrampolineMax + 1, 0}} {
		sel := &selector.Selection{}
		for i := range r[0] {
			sel.Selected = append(sel.Selected, &kernel.Function{Name: fmt.Sprint("f", i)})
		}
		b, _ := auto(sel, false, probe)
		if b == nil {
			return nil
		}
		if n := len(choices); n > 0 && choices[n-1].Backend == b {
			choices[n-1].Max = r[1]
			continue
		}
		choices = append(choices, autoChoice{Min: r[0], Max: r[1], Backend: b})
	}
	return choices
}
