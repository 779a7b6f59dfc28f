// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/record"
	"github.com/trawl-dev/trawl/internal/selector"
)

// TestTracker resolves --track's type, by name and by argument name, and
// plans the tracked slots, clones and free functions, on a real arm64
// kernel's BTF.
func TestTracker(t *testing.T) {
	cat, err := kernel.Load(os.DirFS("internal/kernel/testdata/arm64"))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := selector.Select(cat, []string{"ip_finish_output2", "tcp_sendmsg", "vfs_read"})
	if err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"skb":                    "struct sk_buff *",
		"struct sk_buff*":        "struct sk_buff *",
		"const struct sk_buff *": "struct sk_buff *",
		"sk":                     "struct sock *",
	} {
		tr, err := newTracker(spec, sel.Selected)
		if err != nil || tr.typ != want {
			t.Errorf("--track %q: %v, %v; want %s", spec, tr, err, want)
		}
	}
	for spec, want := range map[string]string{
		"":             "no type",
		"nosuchname":   "no selected function has an argument of that name",
		"unsigned int": "not a pointer type",
	} {
		if _, err := newTracker(spec, sel.Selected); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--track %q: %v, want an error saying %q", spec, err, want)
		}
	}

	tr, err := newTracker("skb", sel.Selected)
	if err != nil {
		t.Fatal(err)
	}
	fn := cat.Lookup("tcp_v4_rcv")[0]
	p, err := plan.New(fn, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.MarkTrack(tr.isType, tr.life[fn.Name]) || !slices.Equal(p.Track.Args, []int{0}) || p.Track.Ret || p.Track.Free || p.Track.Drop {
		t.Errorf("tcp_v4_rcv: %+v, want its argument 0 tracked", p.Track)
	}
	w, err := record.Wire(p, plan.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	if w.TrackSlots != 1 {
		t.Errorf("tcp_v4_rcv: tracked slots %#x, want 0x1", w.TrackSlots)
	}

	sock, err := newTracker("struct sock *", sel.Selected)
	if err != nil {
		t.Fatal(err)
	}
	if p.MarkTrack(sock.isType, sock.life[fn.Name]) {
		t.Errorf("tcp_v4_rcv takes no struct sock *: %+v", p.Track)
	}

	before := len(sel.Selected)
	tr.addLifeFuncs(cat, sel)
	for _, fn := range sel.Selected[before:] {
		life := tr.life[fn.Name]
		if !life.Free && !life.Drop {
			t.Errorf("%s added, not a function of lifeEnds", fn.Name)
		}
	}
}

// TestLifeTypes checks the types of lifeEnds are written as patterns compare
// them, and no function is both a free and a drop.
func TestLifeTypes(t *testing.T) {
	for typ, fns := range lifeEnds {
		if selector.NormalizeType(typ) != typ || !strings.HasSuffix(typ, " *") {
			t.Errorf("lifeEnds type %q: want it as trawl list writes it", typ)
		}
		for _, name := range fns.Frees {
			if slices.Contains(fns.Drops, name) {
				t.Errorf("%s: %s both frees and drops", typ, name)
			}
		}
	}
}
