// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"

	"github.com/trawl-dev/trawl/call"
)

// maxJourney bounds the calls buffered for one journey: a longer one is
// written as far as it got, and goes on in a new group. maxOpen bounds
// the calls buffered for all journeys: past it, every open journey is
// written as far as it got.
const (
	maxJourney = 1 << 16
	maxOpen    = 1 << 18
)

// Journeys writes the calls of a session that tracks objects
// (trawl.Config Track) grouped by journey (call.Call's Track), each journey's
// calls in start order, as text lines or, indented by depth, as a tree:
//
//	journey 0xffff888004b2c000: 9 calls, ended by kfree_skbmem, reason=SKB_DROP_REASON_NO_SOCKET
//	  22:13:20.000000 curl[5000/5001] __ip_queue_xmit(sk={...}, skb={len=5, ...}, fl=0xffff888003c4b9e8) = 0 31.1µs
//	  22:13:20.000010 curl[5000/5001] ip_output(net=init_net, sk={...}, skb={len=57, ...}) = 0 30.2µs
//
// A journey is written when the call that frees its last object arrives
// (call.TrackEnd): its header names that call and, when a call of the journey
// has an enum argument named reason (the drop reason of
// kfree_skb_reason and sk_skb_reason_drop), its value. Close writes the
// journeys still open, by their first call, marked "still tracked", as
// does a Call that finds too many calls buffered.
// Calls of no journey (their object was evicted while they ran) are
// written at once.
type Journeys struct {
	w    *bufio.Writer
	f    formatter
	tree bool
	open map[uint64][]call.Call
	// buffered counts the calls in open.
	buffered int
	line     []byte
}

// NewJourneys returns a Journeys renderer writing to w, as text lines,
// or as trees when tree is set.
func NewJourneys(w io.Writer, opts Options, tree bool) *Journeys {
	return &Journeys{w: bufio.NewWriterSize(w, 64<<10), f: newFormatter(opts), tree: tree, open: map[uint64][]call.Call{}}
}

// Call buffers c in its journey, and writes the journey when c ends it.
func (j *Journeys) Call(c *call.Call) error {
	if c.Track == 0 {
		return j.write(0, []call.Call{*c})
	}
	cp := *c
	cp.Args = slices.Clone(c.Args)
	cp.Show = slices.Clone(c.Show)
	calls := append(j.open[c.Track], cp)
	if c.Flags&call.TrackEnd == 0 && len(calls) < maxJourney {
		j.open[c.Track] = calls
		if j.buffered++; j.buffered >= maxOpen {
			return j.writeOpen()
		}
		return nil
	}
	delete(j.open, c.Track)
	j.buffered -= len(calls) - 1
	return j.write(c.Track, calls)
}

// Flush writes out the buffered output: the journeys that ended.
func (j *Journeys) Flush() error { return j.w.Flush() }

// Close writes the journeys still open, by their first call, and
// flushes.
func (j *Journeys) Close() error {
	if err := j.writeOpen(); err != nil {
		return err
	}
	return j.w.Flush()
}

// writeOpen writes the journeys still open, by their first call.
func (j *Journeys) writeOpen() error {
	groups := make([][]call.Call, 0, len(j.open))
	for _, calls := range j.open {
		slices.SortStableFunc(calls, byStart)
		groups = append(groups, calls)
	}
	slices.SortFunc(groups, func(a, b []call.Call) int { return byStart(a[0], b[0]) })
	for _, calls := range groups {
		if err := j.write(calls[0].Track, calls); err != nil {
			return err
		}
	}
	clear(j.open)
	j.buffered = 0
	return nil
}

// byStart orders calls by their start, outer calls first.
func byStart(a, b call.Call) int {
	return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(a.Depth, b.Depth))
}

// write writes the calls of journey id (0: none) under its header.
func (j *Journeys) write(id uint64, calls []call.Call) error {
	slices.SortStableFunc(calls, byStart)
	b := j.line[:0]
	if id != 0 {
		b = j.appendHeader(b, id, calls)
	}
	// Depths count every traced call in progress, tracked or not: a tree
	// indents each task's calls from the least of them.
	least := map[uint32]int{}
	for i := range calls {
		if d, ok := least[calls[i].TID]; !ok || calls[i].Depth < d {
			least[calls[i].TID] = calls[i].Depth
		}
	}
	for i := range calls {
		c := &calls[i]
		indent := 2
		if j.tree {
			depth := min(max(c.Depth-least[c.TID], 0), 64)
			b = append(b, "  "...)
			b = appendDurationColumn(b, &j.f, c.Duration)
			b = append(b, "  "...)
			b = j.f.appendTask(b, c)
			b = append(b, ' ')
			for range depth {
				b = append(b, "  "...)
			}
			b = j.f.appendCall(b, c)
			indent = durationWidth + 6 + 2*depth
		} else {
			b = append(b, "  "...)
			b = j.f.appendTime(b, c.TS)
			b = append(b, ' ')
			b = j.f.appendTask(b, c)
			b = append(b, ' ')
			b = j.f.appendCall(b, c)
			if c.Duration != 0 {
				b = append(b, ' ')
				b = j.f.appendDuration(b, c.Duration)
			}
		}
		b = append(b, '\n')
		b = j.f.appendStack(b, c, indent+4)
	}
	j.line = b
	_, err := j.w.Write(b)
	return err
}

// appendHeader appends the header line of journey id.
func (j *Journeys) appendHeader(b []byte, id uint64, calls []call.Call) []byte {
	b = j.f.color(b, colFunc)
	b = append(b, "journey 0x"...)
	b = strconv.AppendUint(b, id, 16)
	b = j.f.color(b, colReset)
	b = append(b, ": "...)
	b = strconv.AppendInt(b, int64(len(calls)), 10)
	b = append(b, " call"...)
	if len(calls) != 1 {
		b = append(b, 's')
	}
	end := slices.IndexFunc(calls, func(c call.Call) bool { return c.Flags&call.TrackEnd != 0 })
	if end < 0 {
		b = j.f.color(b, colNote)
		b = append(b, ", still tracked"...)
		b = j.f.color(b, colReset)
	} else {
		b = append(b, ", ended by "...)
		b = appendEscaped(b, calls[end].Func)
	}
	if r, ok := dropReason(calls); ok {
		b = append(b, ", reason="...)
		b = j.f.color(b, colErr)
		b = appendEscaped(b, r)
		b = j.f.color(b, colReset)
	}
	return append(b, '\n')
}

// dropReason returns the value of the first enum argument named reason
// among calls, as an skb's drop reason.
func dropReason(calls []call.Call) (string, bool) {
	for i := range calls {
		for _, a := range calls[i].Args {
			if a.Name == "reason" && a.Kind == call.KindEnum {
				if a.Str == "" {
					return strconv.FormatUint(a.Bits, 10), true
				}
				return a.Str, true
			}
		}
	}
	return "", false
}
