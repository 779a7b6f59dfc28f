package backend

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// fentryParallel is how many functions load at once. Attaching a
// trampoline waits for RCU grace periods (about 100 ms before 7.0) more
// than it uses a CPU, so many loads overlap well even on two cores.
const fentryParallel = 32

// AttachFentry loads one fentry and one fexit program per target, each a
// copy of the capture program sharing maps, in parallel. Needs 5.17
// (bpf_get_func_arg) and 6.0 (cookies on trampoline links).
func AttachFentry(ctx context.Context, spec *ebpf.CollectionSpec, maps map[string]*ebpf.Map, targets []Target, progress Progress) (*Attachment, error) {
	return attachEach(ctx, targets, progress, func(a *Attachment, t Target) error {
		return attachFentryOne(a, spec, maps, t)
	})
}

// attachEach runs attach for every target, fentryParallel at a time.
func attachEach(ctx context.Context, targets []Target, progress Progress, attach func(*Attachment, Target) error) (*Attachment, error) {
	a := newAttachment()
	var done atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fentryParallel)
	for _, t := range targets {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := attach(a, t)
			if progress != nil {
				progress(int(done.Add(1)), len(targets))
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// kinds are the two programs attached to each function: fexit first, so
// that a call in flight while attaching has at worst an exit without its
// entry (sent flagged), never an entry whose frame nobody pops.
var kinds = []struct {
	prog   string
	attach ebpf.AttachType
}{
	{bpf.CaptureProgFexitCapture, ebpf.AttachTraceFExit},
	{bpf.CaptureProgFentryCapture, ebpf.AttachTraceFEntry},
}

func attachFentryOne(a *Attachment, spec *ebpf.CollectionSpec, maps map[string]*ebpf.Map, t Target) error {
	fn := t.Plan.Func
	var progs []*ebpf.Program
	var links []link.Link
	fail := func(err error) error {
		for _, l := range links {
			l.Close()
		}
		for _, p := range progs {
			p.Close()
		}
		if reason := classify(err); reason != "" {
			a.skip(reason, fn.Name)
			return nil
		}
		return fmt.Errorf("attach to %s: %w", fn.Name, err)
	}
	for _, kind := range kinds {
		ps := spec.Programs[kind.prog].Copy()
		ps.AttachTo = fn.Name
		if err := SpliceFilter(ps, []Target{t}); err != nil {
			return fail(err)
		}
		coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{
			Maps:     spec.Maps,
			Programs: map[string]*ebpf.ProgramSpec{kind.prog: ps},
			Types:    spec.Types,
		}, ebpf.CollectionOptions{MapReplacements: maps})
		if err != nil {
			return fail(err)
		}
		prog := coll.DetachProgram(kind.prog)
		coll.Close()
		progs = append(progs, prog)
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: kind.attach, Cookie: uint64(t.ID)})
		if err != nil {
			return fail(err)
		}
		links = append(links, l)
	}
	for i, l := range links {
		a.add(l, program{name: kinds[i].prog, prog: progs[i], owned: true})
	}
	a.mu.Lock()
	a.Attached++
	a.mu.Unlock()
	return nil
}
