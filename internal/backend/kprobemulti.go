// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/plan"
)

// sizeAddresses sizes the address table the kprobe programs find their
// function by, for the selected functions fns.
func sizeAddresses(spec *ebpf.CollectionSpec, fns []*kernel.Function) error {
	return ConfigureAddressTable(spec, AddressBits(fns))
}

// fillAddresses stores the targets' addresses in the loaded table, of the
// size sizeAddresses gave it.
func fillAddresses(coll *ebpf.Collection, targets []Target) error {
	m := coll.Maps[bpf.CaptureMapFuncIps]
	return NewAddressTable(targets, uint32(bits.TrailingZeros32(m.MaxEntries()))).Store(m)
}

// maxBatch is the kernel's cap on addresses in one kprobe.multi link
// (MAX_KPROBE_MULTI_CNT).
const maxBatch = 1 << 20

// NameKprobeMulti names KprobeMulti.
const NameKprobeMulti Name = "kprobe-multi"

// KprobeMulti attaches the entry and exit programs to every address of the
// targets with kprobe.multi and kretprobe.multi links (5.18), cookie = plan
// index. A batch that fails is halved until the failing addresses are
// found and skipped; ENOMEM, seen on 6.7-6.11 for large batches, also
// halves it.
var KprobeMulti = register(&Backend{
	Name:    NameKprobeMulti,
	Needs:   features.KprobeMulti,
	Family:  plan.Kprobe,
	Keeps:   []string{bpf.CaptureProgKprobeCapture, bpf.CaptureProgKretprobeCapture},
	Prepare: sizeAddresses,
	Fill:    fillAddresses,
	Attach:  attachKprobeMulti,
})

func attachKprobeMulti(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	entry, exit := c.Collection.Programs[bpf.CaptureProgKprobeCapture], c.Collection.Programs[bpf.CaptureProgKretprobeCapture]
	a := newAttachment(len(targets), progress)
	a.programs = []program{{name: "kprobe_capture", prog: entry}, {name: "kretprobe_capture", prog: exit}}
	return attachByAddress(ctx, a, "kprobe.multi", targets, func(opts link.KprobeMultiOptions) ([]link.Link, error) {
		// The exit link goes first: see kinds in fentry.go.
		r, err := link.KretprobeMulti(exit, opts)
		if err != nil {
			return nil, err
		}
		l, err := link.KprobeMulti(entry, opts)
		if err != nil {
			r.Close()
			return nil, err
		}
		return []link.Link{r, l}, nil
	})
}

// NameKprobeSession names KprobeSession.
const NameKprobeSession Name = "kprobe-session"

// KprobeSession attaches a kprobe.session program to every address of the
// targets with kprobe.session links (6.10), cookie = plan index, batches
// halved on failure as in KprobeMulti. One program runs at entry and exit
// of each call; the kernel runs the exit only when the entry returned 0.
var KprobeSession = register(&Backend{
	Name:   NameKprobeSession,
	Needs:  features.KprobeSession,
	Family: plan.Kprobe,
	Keeps:  []string{bpf.CaptureProgKprobeSessionCapture},
	Prepare: func(spec *ebpf.CollectionSpec, fns []*kernel.Function) error {
		if err := ResolveKfuncs(spec.Programs[bpf.CaptureProgKprobeSessionCapture].Instructions); err != nil {
			return fmt.Errorf("kprobe-session backend: %w", err)
		}
		return sizeAddresses(spec, fns)
	},
	Fill:   fillAddresses,
	Attach: attachKprobeSession,
})

func attachKprobeSession(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error) {
	prog := c.Collection.Programs[bpf.CaptureProgKprobeSessionCapture]
	a := newAttachment(len(targets), progress)
	a.programs = []program{{name: "kprobe_session_capture", prog: prog}}
	return attachByAddress(ctx, a, "kprobe.session", targets, func(opts link.KprobeMultiOptions) ([]link.Link, error) {
		opts.Session = true
		l, err := link.KprobeMulti(prog, opts)
		if err != nil {
			return nil, err
		}
		return []link.Link{l}, nil
	})
}

// attachByAddress attaches every address of the targets in batches with
// attach, which creates the links of one batch or none. A target counts
// as attached when all its addresses are.
func attachByAddress(ctx context.Context, a *Attachment, what string, targets []Target, attach func(link.KprobeMultiOptions) ([]link.Link, error)) (*Attachment, error) {
	var addrs []uintptr
	var cookies []uint64
	var owner []int // target index of each address
	for i, t := range targets {
		if len(t.Plan.Func.Addrs) == 0 {
			a.skipFunc("no address in kallsyms", t.Plan.Func.Name)
			continue
		}
		for _, addr := range t.Plan.Func.Addrs {
			addrs = append(addrs, uintptr(addr))
			cookies = append(cookies, uint64(t.ID))
			owner = append(owner, i)
		}
	}
	b := newBatcher(a, what, owner, len(targets))
	b.attach = func(lo, hi int) ([]link.Link, error) {
		return attach(link.KprobeMultiOptions{Addresses: addrs[lo:hi], Cookies: cookies[lo:hi]})
	}
	b.name = func(i int) string { return fmt.Sprintf("%#x", addrs[i]) }
	var err error
	for lo := 0; lo < len(addrs) && err == nil; lo += maxBatch {
		err = b.run(ctx, lo, min(lo+maxBatch, len(addrs)))
	}
	// On error, a holds what was attached: the caller says how far it got
	// and closes it.
	return a, err
}

// batcher attaches items [lo, hi) with one call of attach, which attaches
// all of them or none; a batch that fails is halved until the failing
// items are found and skipped. Items belong to functions (a function may
// have several addresses), which it counts in a as they complete.
type batcher struct {
	a      *Attachment
	what   string // the mechanism, for errors
	attach func(lo, hi int) ([]link.Link, error)
	name   func(i int) string // item i, for skips and errors
	owner  []int              // the function of each item
	left   []int              // per function, its items not yet handled
	failed []bool             // per function, whether an item failed
}

// newBatcher returns a batcher for items of funcs functions, item i
// belonging to function owner[i]; attach and name are still to be set.
func newBatcher(a *Attachment, what string, owner []int, funcs int) *batcher {
	b := &batcher{a: a, what: what, owner: owner, left: make([]int, funcs), failed: make([]bool, funcs)}
	for _, f := range owner {
		b.left[f]++
	}
	return b
}

// handled counts items [lo, hi) as attached or failed, and the functions
// whose last item they are.
func (b *batcher) handled(lo, hi int, ok bool) {
	attached, skipped := 0, 0
	for _, f := range b.owner[lo:hi] {
		b.failed[f] = b.failed[f] || !ok
		if b.left[f]--; b.left[f] > 0 {
			continue
		}
		if b.failed[f] {
			skipped++
		} else {
			attached++
		}
	}
	if attached+skipped > 0 {
		b.a.count(attached, skipped)
	}
}

func (b *batcher) run(ctx context.Context, lo, hi int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	links, err := b.attach(lo, hi)
	if err == nil {
		for _, l := range links {
			b.a.add(l)
		}
		b.handled(lo, hi, true)
		return nil
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("%s: %w", b.what, err)
	}
	if hi-lo == 1 {
		reason := classify(err)
		if reason == "" && !errors.Is(err, syscall.ENOMEM) {
			return fmt.Errorf("%s at %s: %w", b.what, b.name(lo), err)
		}
		if reason == "" {
			reason = "out of memory (ENOMEM)"
		}
		b.a.skip(reason, b.name(lo))
		b.handled(lo, hi, false)
		return nil
	}
	mid := lo + (hi-lo)/2
	if err := b.run(ctx, lo, mid); err != nil {
		return err
	}
	return b.run(ctx, mid, hi)
}
