package backend

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// maxBatch is the kernel's cap on addresses in one kprobe.multi link
// (MAX_KPROBE_MULTI_CNT).
const maxBatch = 1 << 20

// KprobeMulti attaches the entry and exit programs to every address of the
// targets with kprobe.multi and kretprobe.multi links (5.18), cookie = plan
// index. A batch that fails is halved until the failing addresses are
// found and skipped; ENOMEM, seen on 6.7-6.11 for large batches, also
// halves it.
func KprobeMulti(ctx context.Context, entry, exit *ebpf.Program, targets []Target, progress Progress) (*Attachment, error) {
	a := newAttachment()
	a.programs = []program{{name: "kprobe_capture", prog: entry}, {name: "kretprobe_capture", prog: exit}}
	var addrs []uintptr
	var cookies []uint64
	var owner []int // target index of each address
	for i, t := range targets {
		if len(t.Plan.Func.Addrs) == 0 {
			a.skip("no address in kallsyms", t.Plan.Func.Name)
			continue
		}
		for _, addr := range t.Plan.Func.Addrs {
			addrs = append(addrs, uintptr(addr))
			cookies = append(cookies, uint64(t.ID))
			owner = append(owner, i)
		}
	}
	b := &batcher{a: a, entry: entry, exit: exit, addrs: addrs, cookies: cookies, progress: progress, failed: map[int]bool{}}
	for lo := 0; lo < len(addrs); lo += maxBatch {
		if err := b.attach(ctx, lo, min(lo+maxBatch, len(addrs))); err != nil {
			a.Close()
			return nil, err
		}
	}
	failedTargets := map[int]bool{}
	for i := range b.failed {
		failedTargets[owner[i]] = true
	}
	for i := range targets {
		if len(targets[i].Plan.Func.Addrs) > 0 && !failedTargets[i] {
			a.Attached++
		}
	}
	return a, nil
}

type batcher struct {
	a           *Attachment
	entry, exit *ebpf.Program
	addrs       []uintptr
	cookies     []uint64
	done        int
	progress    Progress
	failed      map[int]bool // address indexes that could not be attached
}

func (b *batcher) attach(ctx context.Context, lo, hi int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	opts := link.KprobeMultiOptions{Addresses: b.addrs[lo:hi], Cookies: b.cookies[lo:hi]}
	// The exit link goes first: see kinds in fentry.go.
	r, err := link.KretprobeMulti(b.exit, opts)
	if err == nil {
		var l link.Link
		l, err = link.KprobeMulti(b.entry, opts)
		if err != nil {
			r.Close()
		} else {
			b.a.add(r)
			b.a.add(l)
			b.done += hi - lo
			if b.progress != nil {
				b.progress(b.done, len(b.addrs))
			}
			return nil
		}
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("kprobe.multi: %w", err)
	}
	if hi-lo == 1 {
		reason := classify(err)
		if reason == "" && !errors.Is(err, syscall.ENOMEM) {
			return fmt.Errorf("kprobe.multi at %#x: %w", b.addrs[lo], err)
		}
		if reason == "" {
			reason = "out of memory (ENOMEM)"
		}
		b.a.skip(reason, fmt.Sprintf("%#x", b.addrs[lo]))
		b.failed[lo] = true
		b.done++
		return nil
	}
	mid := lo + (hi-lo)/2
	if err := b.attach(ctx, lo, mid); err != nil {
		return err
	}
	return b.attach(ctx, mid, hi)
}
