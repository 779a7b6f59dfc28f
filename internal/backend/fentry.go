// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/plan"
)

// fentryParallel is how many functions load at once. Attaching a
// trampoline waits for RCU grace periods (about 100 ms before 7.0) more
// than it uses a CPU, so many loads overlap well even on two cores.
const fentryParallel = 32

// NameFentry names Fentry.
const NameFentry Name = "fentry"

// Fentry loads one fentry and one fexit program per target, each a copy
// of the capture program sharing maps, in parallel. From 5.17 they read
// the arguments with bpf_get_func_arg and know their function by the
// attach cookie (6.0); before, they know their function and slot count
// as constants and read the trampoline's context directly (fentry_one).
//
// All loads share one decoded kernel BTF: without it cilium/ebpf decodes
// vmlinux BTF again for every program to find its attach target, four
// fifths of each load (docs/benchmarks.md, "One program per function").
var Fentry = register(&Backend{
	Name:   NameFentry,
	Needs:  features.Fentry,
	Family: plan.Trampoline,
	Attach: attachFentry,
	cost:   &fentryCost,
})

func attachFentry(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	ld := &fentryLoader{kinds: kinds}
	switch err := features.FuncArgHelpers(); {
	case errors.Is(err, ebpf.ErrNotSupported):
		ld.kinds = kindsOne
	case err != nil:
		return nil, fmt.Errorf("probe for bpf_get_func_arg: %w", err)
	}
	return attachEach(ctx, targets, fentryCost, progress, func(a *Attachment, t Target) error {
		return attachFentryOne(a, c.Spec, c.Collection.Maps, ld, t)
	})
}

// fentryLoader is what the parallel loads share: the process's kernel BTF
// (kernel.LoadOptions), and a lock for loads whose target is in a module. cilium/ebpf v0.22
// decodes a module's split BTF into the shared vmlinux types without
// holding their lock, so two such loads at once may crash the process
// (concurrent map writes).
type fentryLoader struct {
	modules sync.Mutex
	// kinds are the programs to load: kinds, or kindsOne on kernels
	// without bpf_get_func_arg.
	kinds []fentryKind
}

// load loads the programs of one function.
func (l *fentryLoader) load(spec *ebpf.CollectionSpec, maps map[string]*ebpf.Map, module string) (*ebpf.Collection, error) {
	if module != "" {
		l.modules.Lock()
		defer l.modules.Unlock()
	}
	return ebpf.NewCollectionWithOptions(spec, kernel.LoadOptions(maps))
}

// perFunction is what each function attached by a backend that loads
// programs per function holds.
type perFunction struct {
	// files open: programs, their BTF, links.
	files int
	// memory is the kernel memory, in bytes, as measured by the attach
	// bench (docs/benchmarks.md, "Kernel memory"), rounded up.
	memory int64
}

// fentryCost: fentry and fexit programs, their BTF and their links, as
// measured between 100 and 1000 functions in the 7.3 guests.
var fentryCost = perFunction{files: 6, memory: 68 << 10}

// ErrNotEnoughMemory is returned when the functions selected would take
// more kernel memory than the machine can spare.
var ErrNotEnoughMemory = errors.New("not enough memory")

// checkMemory fails when n functions at cost each would take more than
// half of the available memory: loading programs until the kernel runs
// out would bring the machine down, not only trawl.
func checkMemory(n int, cost perFunction, available int64) error {
	need := int64(n) * cost.memory
	if need <= available/2 {
		return nil
	}
	return fmt.Errorf("%w: %d functions would hold about %d MB of kernel memory (%d KB each), more than half of the %d MB available: select fewer functions, or use kprobe-multi, kprobe-session or tracing-multi where the kernel has them (trawl features), which attach any number through one program",
		ErrNotEnoughMemory, n, need>>20, cost.memory>>10, available>>20)
}

// attachEach runs attach for every target, fentryParallel at a time,
// after making room for their open files (their memory was checked by
// Backend.Fits). attach counts each target attached (addFunc) or skipped
// (skipFunc), or fails.
func attachEach(ctx context.Context, targets []Target, cost perFunction, progress Progress, attach func(*Attachment, Target) error) (*Attachment, error) {
	if err := raiseFileLimit(len(targets) * cost.files); err != nil {
		return nil, err
	}
	a := newAttachment(len(targets), progress)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fentryParallel)
	for _, t := range targets {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return attach(a, t)
		})
	}
	return a, g.Wait()
}

// fileMargin is how many files raiseFileLimit leaves for the rest of
// the process and for the files loads open for a moment.
const fileMargin = 256

// raiseFileLimit raises the soft limit on open files, and the hard one
// if need be, so that the process can open n more. Without the privilege
// to raise the hard limit, it raises the soft one as far as it goes.
func raiseFileLimit(n int) error {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("count open files: %w", err)
	}
	want := uint64(len(fds) + n + fileMargin)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read the open files limit: %w", err)
	}
	if want <= lim.Cur {
		return nil
	}
	raised := unix.Rlimit{Cur: want, Max: max(lim.Max, want)}
	err = unix.Setrlimit(unix.RLIMIT_NOFILE, &raised)
	if errors.Is(err, unix.EPERM) && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		err = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
	if err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("raise the open files limit to %d: %w", want, err)
	}
	return nil
}

// kinds are the two programs attached to each function: fexit first, so
// that a call in flight while attaching has at worst an exit without its
// entry (sent flagged), never an entry whose frame nobody pops. Detaching
// goes the other way.
var kinds = []fentryKind{
	{bpf.CaptureProgFexitCapture, ebpf.AttachTraceFExit, true},
	{bpf.CaptureProgFentryCapture, ebpf.AttachTraceFEntry, true},
}

// kindsOne are the programs of kernels without bpf_get_func_arg (before
// 5.17) or attach cookies (before 6.0), in the same order.
var kindsOne = []fentryKind{
	{bpf.CaptureProgFexitOne, ebpf.AttachTraceFExit, false},
	{bpf.CaptureProgFentryOne, ebpf.AttachTraceFEntry, false},
}

// fentryKind is one of the programs attached to each function.
type fentryKind struct {
	prog   string
	attach ebpf.AttachType
	// cookie says the program knows its function by the attach cookie,
	// not as a constant.
	cookie bool
}

// attachFentryOne loads the fexit and fentry programs for t, both in one
// collection and with t's filter and capture count spliced in, and
// attaches them.
func attachFentryOne(a *Attachment, spec *ebpf.CollectionSpec, maps map[string]*ebpf.Map, ld *fentryLoader, t Target) error {
	names := make([]string, len(ld.kinds))
	for i, kind := range ld.kinds {
		names[i] = kind.prog
	}
	prepare := func(ps *ebpf.ProgramSpec) { ps.AttachTo = t.Plan.Func.Name }
	return attachOne(a, spec, maps, ld, t, names, prepare, func(i int, prog *ebpf.Program) (link.Link, error) {
		var cookie uint64
		if ld.kinds[i].cookie {
			cookie = t.TrampolineCookie()
		}
		return link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ld.kinds[i].attach, Cookie: cookie})
	})
}

// attachOne loads the programs named for target t alone, with its ID,
// capture count and filter spliced in and prepare applied to each, in
// one collection sharing maps, then attaches the i-th with attach, in
// order. An error classify knows skips the function; whatever was made
// for it is closed.
func attachOne(a *Attachment, spec *ebpf.CollectionSpec, maps map[string]*ebpf.Map, ld *fentryLoader, t Target,
	names []string, prepare func(*ebpf.ProgramSpec), attach func(i int, prog *ebpf.Program) (link.Link, error)) error {
	fn := t.Plan.Func
	var links []link.Link
	var progs []program
	fail := func(err error) error {
		for _, l := range links {
			l.Close()
		}
		for _, p := range progs {
			p.prog.Close()
		}
		if reason := classify(err); reason != "" {
			a.skipFunc(reason, fn.Name)
			return nil
		}
		return fmt.Errorf("attach to %s: %w", fn.Name, err)
	}
	one := &ebpf.CollectionSpec{Maps: spec.Maps, Programs: map[string]*ebpf.ProgramSpec{}, Types: spec.Types}
	for _, name := range names {
		ps := spec.Programs[name].Copy()
		prepare(ps)
		if err := SpliceFilter(ps, []Target{t}); err != nil {
			return fail(err)
		}
		insns, err := spliceOne(ps.Instructions, t)
		if err != nil {
			return fail(err)
		}
		ps.Instructions = insns
		one.Programs[name] = ps
	}
	coll, err := ld.load(one, maps, fn.Module)
	if err != nil {
		return fail(err)
	}
	for _, name := range names {
		progs = append(progs, program{name: name, prog: coll.DetachProgram(name), owned: true})
	}
	coll.Close()
	for i := range names {
		l, err := attach(i, progs[i].prog)
		if err != nil {
			return fail(err)
		}
		links = append(links, l)
	}
	a.addFunc(links, progs)
	return nil
}
