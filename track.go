// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/skip"
)

// lifeEnds lists, per type --track follows, the functions at the end of an
// object's life: docs/track.md shows this table. All of them the kernel
// has (some are inlined, renamed or newer) are traced with --track,
// whether the patterns select them or not, so that journeys show how
// they end. The Frees free the object they receive every time they are
// called: its tracking ends at their exit (so that the calls they make
// on it are still in its journey). The Drops drop a reference, and free
// the object through the Frees when it was the last: kfree_skb_reason
// (sk_skb_reason_drop from 6.10), whose reason argument, enum
// skb_drop_reason, says why a packet was dropped, and consume_skb for
// packets that arrived. Neither starts a journey.
var lifeEnds = map[string]endOfLife{
	"struct sk_buff *": {
		Frees: []string{"__kfree_skb", "kfree_skbmem", "__napi_kfree_skb", "napi_skb_cache_put", "kfree_skb_partial"},
		Drops: []string{"kfree_skb_reason", "sk_skb_reason_drop", "kfree_skb_list_reason", "consume_skb", "napi_consume_skb"},
	},
	"struct sock *":        {Frees: []string{"__sk_destruct", "sk_prot_free"}, Drops: []string{"sk_free"}},
	"struct file *":        {Frees: []string{"__fput", "file_free"}, Drops: []string{"fput"}},
	"struct request *":     {Frees: []string{"__blk_mq_free_request"}, Drops: []string{"blk_mq_free_request"}},
	"struct bio *":         {Frees: []string{"bio_free"}, Drops: []string{"bio_put"}},
	"struct inode *":       {Frees: []string{"free_inode_nonrcu"}, Drops: []string{"iput"}},
	"struct task_struct *": {Frees: []string{"free_task"}, Drops: []string{"__put_task_struct"}},
	"struct nf_conn *":     {Frees: []string{"nf_conntrack_free"}, Drops: []string{"nf_ct_destroy"}},
}

// endOfLife are the functions at the end of the life of objects of a
// type (see lifeEnds).
type endOfLife struct {
	Frees, Drops []string
}

// defaultTrackObjects is how many objects --track follows at once by
// default: the size of the kernel's maps of them, about 200 bytes each.
const defaultTrackObjects = 16384

// allLifeFuncs lists the functions of lifeEnds, for a catalogue that must
// hold them.
func allLifeFuncs() []string {
	var names []string
	for _, fns := range lifeEnds {
		names = append(names, fns.Frees...)
		names = append(names, fns.Drops...)
	}
	slices.Sort(names)
	return names
}

// tracker is what --track needs to plan: the type, and its free
// functions.
type tracker struct {
	// typ is the type as patterns write it, "struct sk_buff *".
	typ string
	// life holds the functions of lifeEnds for typ.
	life map[string]plan.Track
	// is caches, per BTF type, whether it is typ.
	is map[btf.Type]bool
	// noStart lists, by reason, the functions the filters would have
	// left out: traced all the same, they start no journey.
	noStart skip.Reasons
}

// neverPasses is the --filter body of a function that starts no journey.
var neverPasses = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}

// cannotStart notes that fn, which the filters would leave out for
// reason, starts no journey, and returns its --filter body (none
// without an expression).
func (t *tracker) cannotStart(reason, fn string, expr bool) asm.Instructions {
	t.noStart.Add(reason, fn)
	if !expr {
		return nil
	}
	return neverPasses
}

// notify tells the user which functions start no journey.
func (t *tracker) notify(notify func(string)) {
	for _, line := range t.noStart.Summary(1) {
		notify("--track: traced only in journeys, never starting one: " + line)
	}
}

// newTracker resolves --track's spec among the selected functions: a
// C pointer type ("struct sk_buff *"), or the name of their arguments of
// the type (skb), the type then being the most common among the
// arguments of that name.
func newTracker(spec string, fns []*kernel.Function) (*tracker, error) {
	typ := selector.NormalizeType(spec)
	if typ == "" {
		return nil, errors.New("--track: no type given")
	}
	if !strings.Contains(typ, " ") && !strings.Contains(typ, "*") {
		var err error
		if typ, err = argType(typ, fns); err != nil {
			return nil, err
		}
	}
	if !strings.HasSuffix(typ, "*") {
		return nil, fmt.Errorf("--track %q: %s is not a pointer type: trawl follows objects by their address", spec, typ)
	}
	t := &tracker{typ: typ, life: map[string]plan.Track{}, is: map[btf.Type]bool{}, noStart: skip.Reasons{}}
	for _, name := range lifeEnds[typ].Frees {
		t.life[name] = plan.Track{Free: true}
	}
	for _, name := range lifeEnds[typ].Drops {
		t.life[name] = plan.Track{Drop: true}
	}
	return t, nil
}

// argType returns the most common type of the arguments called name.
func argType(name string, fns []*kernel.Function) (string, error) {
	counts := map[string]int{}
	for _, fn := range fns {
		proto := fn.Proto()
		if proto == nil {
			continue
		}
		fp, ok := proto.Type.(*btf.FuncProto)
		if !ok {
			continue
		}
		for _, p := range fp.Params {
			if p.Name == name {
				counts[selector.NormalizeType(kernel.TypeString(p.Type))]++
			}
		}
	}
	if len(counts) == 0 {
		return "", fmt.Errorf("--track %q: no selected function has an argument of that name: give its type, as 'struct sk_buff *'", name)
	}
	types := make([]string, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	return types[0], nil
}

// isType says whether t is the tracked type.
func (t *tracker) isType(bt btf.Type) bool {
	is, ok := t.is[bt]
	if !ok {
		is = selector.NormalizeType(kernel.TypeString(bt)) == t.typ
		t.is[bt] = is
	}
	return is
}

// skipReason is why a function without an argument of the type is left
// out: none of its calls could be in a journey.
func (t *tracker) skipReason() string {
	return "no argument of the tracked type " + t.typ
}

// addLifeFuncs adds the type's functions of lifeEnds the kernel has to the
// selection, traceable and not denied, unless it has them.
func (t *tracker) addLifeFuncs(cat *kernel.Catalogue, sel *selector.Selection) {
	life := lifeEnds[t.typ]
	for _, name := range append(slices.Clone(life.Frees), life.Drops...) {
		for _, fn := range cat.Lookup(name) {
			if fn.Traceable && selector.Denied(fn) == "" && !slices.Contains(sel.Selected, fn) {
				sel.Selected = append(sel.Selected, fn)
			}
		}
	}
}

// configureTrack sets the capture program up for --track.
func configureTrack(spec *ebpf.CollectionSpec, cfg Config) error {
	if cfg.Track == "" {
		return nil
	}
	n := uint32(cmp.Or(cfg.TrackObjects, defaultTrackObjects))
	spec.Maps[bpf.CaptureMapTracks].MaxEntries = n
	spec.Maps[bpf.CaptureMapJourneys].MaxEntries = n
	set := map[string]any{
		bpf.CaptureVarTrackOn:      uint32(1),
		bpf.CaptureVarTrackTimeout: uint64(cfg.TrackTimeout.Nanoseconds()),
	}
	for name, v := range set {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// trackedNow counts the objects the tracks map still tracks (freed ones
// left out), to tell how many it evicted.
func trackedNow(m *ebpf.Map) (uint64, error) {
	var (
		key uint64
		t   bpf.CaptureTracked
		n   uint64
	)
	it := m.Iterate()
	for it.Next(&key, &t) {
		if t.Seen != 0 {
			n++
		}
	}
	return n, it.Err()
}
