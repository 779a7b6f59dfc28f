// SPDX-License-Identifier: Apache-2.0

// Package backend attaches trawl's capture program to kernel functions:
// fentry/fexit trampolines (one program load per function, in parallel,
// sharing maps) or kprobe.multi/kretprobe.multi links (one program, links
// by address in batches). Functions that fail for a known, harmless reason
// are skipped and counted by reason; anything else is an error.
package backend

import (
	"cmp"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/skip"
)

// Target is a function to attach to. ID is the index of its plan in the
// plans map, passed to the program as the attach cookie. Filter is the
// function's compiled --filter expression (see internal/filter), nil
// without one; SpliceFilter puts it into a program.
type Target struct {
	ID     uint32
	Plan   *plan.Plan
	Filter asm.Instructions
	// Show is the function's compiled --show expressions, nil without
	// any; SpliceFilter puts it into a program too.
	Show asm.Instructions
	// Entry is set for an --entry function.
	Entry bool
}

// TrampolineCookie is the attach cookie of t's trampoline programs: its
// plan index, with bit COOKIE_ENTRY set for an --entry function, so that
// the program tells a call outside every entry call without reading the
// plan (gated_out in internal/bpf/gate.h).
func (t Target) TrampolineCookie() uint64 {
	c := uint64(t.ID)
	if t.Entry {
		c |= 1 << bpf.CaptureCookieBitCOOKIE_ENTRY
	}
	return c
}

// Progress is told, each time functions are attached or skipped, how
// many of the total are attached and how many skipped so far. Calls come
// one at a time.
type Progress func(attached, skipped, total int)

// Attachment holds what a backend attached.
type Attachment struct {
	mu       sync.Mutex
	links    []link.Link
	programs []program
	// misses holds the recursion misses read when the programs closed.
	misses map[string]uint64
	// Attached is the number of functions attached.
	Attached int
	// Skipped lists what was skipped by reason: functions, or for the
	// kprobe backends addresses.
	Skipped skip.Reasons
	// skipped is the number of functions skipped.
	skipped  int
	total    int
	progress Progress
}

// newAttachment returns an attachment for total functions that tells
// progress, if not nil, how attaching goes.
func newAttachment(total int, progress Progress) *Attachment {
	return &Attachment{Skipped: skip.Reasons{}, total: total, progress: progress}
}

// program is a loaded program and the name of the capture program it is a
// copy of. Owned programs are closed with the attachment.
type program struct {
	name  string
	prog  *ebpf.Program
	owned bool
}

func (a *Attachment) add(l link.Link, progs ...program) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.links = append(a.links, l)
	a.programs = append(a.programs, progs...)
}

// addFunc adds the links and programs attached to one function and counts
// it as attached.
func (a *Attachment) addFunc(links []link.Link, progs []program) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.links = append(a.links, links...)
	a.programs = append(a.programs, progs...)
	a.countLocked(1, 0)
}

// Join adds what b attached and skipped to a and returns a, or b when a
// is nil: the functions a backend attached and the tracepoints
// AttachTracepoints did are closed and counted together.
func (a *Attachment) Join(b *Attachment) *Attachment {
	if a == nil || b == nil {
		return cmp.Or(a, b)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	a.links = append(a.links, b.links...)
	a.programs = append(a.programs, b.programs...)
	a.Skipped.Merge(b.Skipped)
	a.Attached += b.Attached
	a.skipped += b.skipped
	a.total += b.total
	b.links, b.programs = nil, nil
	return a
}

// skip lists item, a function or an address, as skipped for reason.
func (a *Attachment) skip(reason, item string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Skipped.Add(reason, item)
}

// skipFunc lists function fn as skipped for reason and counts it.
func (a *Attachment) skipFunc(reason, fn string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Skipped.Add(reason, fn)
	a.countLocked(0, 1)
}

// count counts functions attached and skipped whose links went in with
// add and whose skips with skip.
func (a *Attachment) count(attached, skipped int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.countLocked(attached, skipped)
}

func (a *Attachment) countLocked(attached, skipped int) {
	a.Attached += attached
	a.skipped += skipped
	if a.progress != nil {
		a.progress(a.Attached, a.skipped, a.total)
	}
}

// RecursionMisses returns, per capture program, how often the kernel
// skipped it because a BPF program was already running on the CPU (5.12+).
func (a *Attachment) RecursionMisses() map[string]uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.misses != nil {
		return a.misses
	}
	misses := map[string]uint64{}
	for _, p := range a.programs {
		if st, err := p.prog.Stats(); err == nil {
			misses[p.name] += st.RecursionMisses
		}
	}
	return misses
}

// Close detaches everything, last attached first: a function's fentry
// program before its fexit one, telling progress (if not nil) how many
// links are closed. The recursion misses stay readable.
//
// One link at a time: closing them in parallel was no faster in the test
// bed guests (6.12, 7.3), as the kernel detaches trampolines one after
// the other (removing the last program of one waits for RCU tasks grace
// periods).
func (a *Attachment) Close(progress func(done, total int)) error {
	misses := a.RecursionMisses()
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for i, l := range slices.Backward(a.links) {
		errs = append(errs, l.Close())
		if progress != nil {
			progress(len(a.links)-i, len(a.links))
		}
	}
	a.misses = misses
	for _, p := range a.programs {
		if p.owned {
			errs = append(errs, p.prog.Close())
		}
	}
	a.links, a.programs = nil, nil
	return errors.Join(errs...)
}

// ENOTSUPP is the kernel's internal "operation not supported" (524), which
// leaks to user space from trampoline and ftrace code.
const ENOTSUPP = syscall.Errno(524)

// skippable classifies attach errors that mean "this function cannot be
// traced this way", with the kernel's reason. Other errors abort.
var skippable = []struct {
	match  func(error) bool
	reason string
}{
	{func(err error) bool { return errors.Is(err, btf.ErrNotFound) }, "not in BTF, so no trampoline can attach"},
	{func(err error) bool { return errors.Is(err, btf.ErrMultipleMatches) }, "several BTF functions of this name, so cilium/ebpf cannot pick one"},
	{func(err error) bool { return errors.Is(err, syscall.EBUSY) }, "busy: another ftrace user owns the function (EBUSY)"},
	{func(err error) bool { return errors.Is(err, syscall.ENOENT) }, "not found by the kernel (ENOENT)"},
	{func(err error) bool { return errors.Is(err, syscall.EADDRNOTAVAIL) }, "address not traceable (EADDRNOTAVAIL)"},
	{func(err error) bool { return errors.Is(err, ENOTSUPP) }, "the kernel cannot patch it (ENOTSUPP)"},
	{func(err error) bool { return errors.Is(err, ebpf.ErrNotSupported) }, "the kernel does not support this attach type on it"},
	{modelRefused, "the kernel cannot model its prototype for a trampoline (a struct argument or return value, or too many arguments)"},
	{func(err error) bool {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			slog.Debug("verifier refused a program", "log", strings.Join(ve.Log, "\n"))
		}
		return ve != nil
	}, "refused by the verifier: a trawl bug, please report it with the log trawl --debug prints"},
	{func(err error) bool { return errors.Is(err, syscall.EINVAL) }, "rejected by the kernel (EINVAL)"},
}

// modelRefused reports whether the kernel refused to attach a trampoline
// because it cannot model the function's prototype:
// btf_distill_func_proto (kernel/bpf/btf.c) says why in a line that
// starts "The function NAME" (too many arguments, a struct or malformed
// argument or return type).
func modelRefused(err error) bool {
	var ve *ebpf.VerifierError
	return errors.As(err, &ve) && slices.ContainsFunc(ve.Log, func(line string) bool {
		return strings.HasPrefix(line, "The function ")
	})
}

// classify returns the reason to skip a function for err, or "".
func classify(err error) string {
	for _, s := range skippable {
		if s.match(err) {
			return s.reason
		}
	}
	return ""
}
