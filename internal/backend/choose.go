// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// Auto is the name that lets Choose pick the backend.
const Auto Name = "auto"

// Names lists the names Choose takes, Auto first, then the backends by
// name.
func Names() []Name {
	names := []Name{Auto}
	for _, b := range All() {
		names = append(names, b.Name)
	}
	return names
}

// autoTrampolineMax is the largest selection auto attaches with one
// trampoline program per function (fsession or fentry) when the kernel
// has a kprobe link for all of them at once; see Choose.
const autoTrampolineMax = 20

// autoSessionMax is the largest selection auto attaches with fsession
// rather than a tracing_multi link, whose creation has a fixed cost: in
// the amd64-7.3 guest, one function took 1.6 s with tracing-multi and
// 0.16 s with fsession, fifteen 1.76 s and 2.2 s.
const autoSessionMax = 8

// autoMultiMax is the largest selection auto attaches with a tracing_multi
// link when the kernel has a kprobe link for all of them at once: the
// link's close grows with the functions it holds and keeps the kernel's
// trampoline lock the while (amd64-7.3 guest: 1,000 functions in 0.5 s,
// every function in 35-61 s idle and over 7 minutes on a busy host, with
// kernel workers blocked behind it), where kprobe.session's closes every
// function in 3.5 s.
const autoMultiMax = 2000

// entryCase says for which traces a rule of auto holds: with --entry
// (gated), without, or both.
type entryCase int

const (
	anyEntry entryCase = iota
	withoutEntry
	withEntry
)

// rule is one step of auto's ranking.
type rule struct {
	// max is the largest selection the rule takes, 0 for any.
	max int
	// entry says whether the rule holds with --entry, without, or both.
	entry entryCase
	// backend is picked when the rule holds and the kernel has it.
	backend *Backend
	// why is the reason given, a format of the number of functions
	// (%[1]d), autoSessionMax (%[2]d), autoTrampolineMax (%[3]d) and
	// autoMultiMax (%[4]d).
	why string
}

// autoRules rank the backends for Auto: the first rule that holds for the
// selection and whose backend the kernel has picks. Choose says why they
// are in this order. fsession is passed over with --entry, where fentry's
// programs run in its place (see Fsession), so that fentry names them.
var autoRules = []rule{
	{autoSessionMax, withoutEntry, Fsession, "%[1]d functions (at most %[2]d): one fsession trampoline program each, faster to attach than a tracing_multi link"},
	{autoSessionMax, withEntry, Fentry, "%[1]d functions (at most %[2]d) with --entry: one fentry and one fexit program each, faster to attach than a tracing_multi link"},
	{autoMultiMax, anyEntry, TracingMulti, "one program and one tracing_multi link for all %[1]d functions (at most %[4]d), trampoline cost per call"},
	{autoTrampolineMax, withoutEntry, Fsession, "%[1]d functions (at most %[3]d): one fsession trampoline program each"},
	{autoTrampolineMax, anyEntry, Fentry, "%[1]d functions (at most %[3]d): one fentry and one fexit program each"},
	{0, anyEntry, KprobeSession, "%[1]d functions (more than %[3]d): one kprobe.session program and link for all"},
	{0, anyEntry, KprobeMulti, "%[1]d functions (more than %[3]d): one kprobe.multi and one kretprobe.multi link for all"},
	{0, anyEntry, TracingMulti, "%[1]d functions: no kprobe.multi on this kernel, so one tracing_multi link for all"},
	{0, withoutEntry, Fsession, "%[1]d functions: no kprobe.multi on this kernel, so one fsession program each"},
	{0, anyEntry, Fentry, "%[1]d functions: no kprobe.multi on this kernel, so one fentry and one fexit program each"},
	{0, anyEntry, Kprobe, "%[1]d functions: neither kprobe.multi nor fentry on this kernel, so one kprobe and one kretprobe each"},
}

// holds reports whether r takes a selection of n functions, with --entry
// when gated.
func (r rule) holds(n int, gated bool) bool {
	if r.max > 0 && n > r.max {
		return false
	}
	switch r.entry {
	case withoutEntry:
		return !gated
	case withEntry:
		return gated
	}
	return true
}

// Probe says whether the running kernel has what a backend needs: nil if
// it has. LiveProbe asks the kernel; tests make up kernels.
type Probe func(*Backend) error

// LiveProbe probes the running kernel for the backend's feature. While
// the process reads the kernel's BTF from a file (kernel.UseBTF), it
// refuses the trampoline backends, which attach by the kernel's own.
func LiveProbe(b *Backend) error {
	return withExternalBTF(func(b *Backend) error { return b.Needs() }, kernel.External() != nil)(b)
}

// withExternalBTF returns probe, refusing the trampoline backends when
// the kernel's BTF comes from a file (external).
func withExternalBTF(probe Probe, external bool) Probe {
	return func(b *Backend) error {
		if external && b.Family == plan.Trampoline {
			return fmt.Errorf("%w, which trampolines attach by (trawl reads its types from %s): a kprobe backend can attach", kernel.ErrExternalBTF, kernel.BTFOrigin())
		}
		return probe(b)
	}
}

// Choose returns the backend named name for a selection of n functions,
// raw of them without a BTF prototype, checked with probe, and why. For
// Auto it weighs attach cost, which grows with the number of functions N,
// against per-call cost (measured numbers in the README, "Choosing a
// backend"), by autoRules:
//
//   - For N <= 8, fsession (7.0): one load per function, in parallel,
//     which attaches a few functions faster than a tracing_multi link.
//   - For N <= 2000, tracing-multi (7.2, x86-64): one verifier run and one
//     link (one per module), and trampoline per-call cost, the lowest
//     there is. Above, its link's close takes too long (autoMultiMax).
//   - For N <= 20, one trampoline program per function: fsession (7.0;
//     one load per function, exact pairing), else fentry/fexit (two
//     loads). The loads run in parallel and take well under a second.
//   - For larger N, a kprobe link for all functions at once: kprobe.session
//     (6.10; one program, no exit run for filtered entries), else
//     kprobe.multi (5.18), else tracing-multi. Attaching stays about
//     constant in N, while per-function trampoline loads grow linearly.
//   - Without either, fsession or fentry, else (before 5.17 without
//     trampolines' argument helpers, arm64 before 6.0) a classic kprobe
//     and kretprobe per function, for as many functions as half the
//     available memory holds (ErrNotEnoughMemory).
//   - With functions without a BTF prototype (raw), which trampolines
//     cannot attach, a kprobe link for all when the kernel has one
//     (kprobe.session, else kprobe.multi), at any N: trawl would
//     otherwise leave out functions it was asked for.
//   - With --entry (gated), fentry instead of fsession, which then
//     attaches fentry's programs: an fsession exit runs for every call,
//     fentry's returns at once for a call outside every entry call.
//
// A backend named with --entry whose programs another's replace then
// (fsession) gives that other one, so that the backend returned always
// names the programs that run. When the backend named cannot attach, or
// for Auto none can, the error is an *Unavailable.
func Choose(name Name, n, raw int, gated bool, probe Probe) (*Backend, string, error) {
	if name == Auto || name == "" {
		b, why := auto(n, raw, gated, probe)
		if b == nil {
			return nil, "", noBackend(probe)
		}
		return b, why, nil
	}
	b := Find(name)
	if b == nil {
		names := make([]string, 0, len(all)+1)
		for _, n := range Names() {
			names = append(names, string(n))
		}
		return nil, "", fmt.Errorf("unknown backend %q (want %s)", name, strings.Join(names, ", "))
	}
	if err := probe(b); err != nil {
		return nil, "", &Unavailable{Named: true, Refusals: []Refusal{{b.Name, err}}}
	}
	if gated && b.withEntry != nil {
		if err := probe(b.withEntry); err != nil {
			return nil, "", fmt.Errorf("%s backend with --entry, which runs %s's programs: %w", name, b.withEntry.Name, err)
		}
		return b.withEntry, fmt.Sprintf("chosen by the caller: %s with --entry runs %s's programs, whose exit returns at once for a call outside every entry call", name, b.withEntry.Name), nil
	}
	return b, "chosen by the caller", nil
}

// auto returns the backend of the first of autoRules that holds for n
// functions and whose backend probe finds, and why; nil if none does.
// With raw functions (no BTF prototype) among them, a kprobe link comes
// first.
func auto(n, raw int, gated bool, probe Probe) (*Backend, string) {
	if raw > 0 {
		for _, b := range []*Backend{KprobeSession, KprobeMulti} {
			if probe(b) == nil {
				return b, fmt.Sprintf("%d functions, %d without a BTF prototype, which trampolines cannot attach: one %s link for all", n, raw, b.Name)
			}
		}
	}
	for _, r := range autoRules {
		if r.holds(n, gated) && probe(r.backend) == nil {
			return r.backend, fmt.Sprintf(r.why, n, autoSessionMax, autoTrampolineMax, autoMultiMax)
		}
	}
	return nil, ""
}

// noBackend says why no backend can attach on this kernel: what each
// lacks, those that only lack a permission first (what the user can
// change).
func noBackend(probe Probe) error {
	var refused, lack []Refusal
	for _, b := range All() {
		switch err := probe(b); {
		case errors.Is(err, ebpf.ErrNotSupported):
			lack = append(lack, Refusal{b.Name, err})
		case err != nil:
			refused = append(refused, Refusal{b.Name, err})
		}
	}
	return &Unavailable{Refusals: append(refused, lack...)}
}

// Unavailable is Choose's error when the backend named cannot attach on
// this kernel, or, for Auto, no backend can.
type Unavailable struct {
	// Named says the caller named the backend.
	Named bool
	// Refusals say why, one a backend.
	Refusals []Refusal
}

// Refusal is why a backend cannot attach: its probe's error.
type Refusal struct {
	Backend Name
	Err     error
}

func (e *Unavailable) Error() string {
	if e.Named {
		return fmt.Sprintf("%s backend: %v", e.Refusals[0].Backend, e.Refusals[0].Err)
	}
	why := make([]string, len(e.Refusals))
	for i, r := range e.Refusals {
		why[i] = fmt.Sprintf("%s: %v", r.Backend, r.Err)
	}
	return "no backend can attach on this kernel: " + strings.Join(why, "; ")
}

// First returns the first refusal whose error matches target, nil if
// none does.
func (e *Unavailable) First(target error) *Refusal {
	for i := range e.Refusals {
		if errors.Is(e.Refusals[i].Err, target) {
			return &e.Refusals[i]
		}
	}
	return nil
}

// Unwrap returns the backends' errors.
func (e *Unavailable) Unwrap() []error {
	errs := make([]error, len(e.Refusals))
	for i, r := range e.Refusals {
		errs[i] = r.Err
	}
	return errs
}

// AutoChoice is what Auto picks for selections of a range of sizes.
type AutoChoice struct {
	// Min and Max bound the number of functions, Max 0 for no bound.
	Min, Max int
	Backend  *Backend
}

// AutoChoices returns what Auto picks, without --entry, for selections of
// every size on the kernel probe describes, in ranges of sizes with the
// same pick, smallest first; none when no backend can attach.
func AutoChoices(probe Probe) []AutoChoice {
	var bounds []int // the sizes at which a rule stops holding
	for _, r := range autoRules {
		if r.max > 0 && !slices.Contains(bounds, r.max) {
			bounds = append(bounds, r.max)
		}
	}
	slices.Sort(bounds)
	bounds = append(bounds, 0)
	var choices []AutoChoice
	lo := 1
	for _, hi := range bounds {
		b, _ := auto(lo, 0, false, probe)
		if b == nil {
			return nil
		}
		if n := len(choices); n > 0 && choices[n-1].Backend == b {
			choices[n-1].Max = hi
		} else {
			choices = append(choices, AutoChoice{Min: lo, Max: hi, Backend: b})
		}
		lo = hi + 1
	}
	return choices
}
