// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
)

// TestJourneys groups calls by journey, in start order, writes a journey
// when its end arrives, with the drop reason, the open ones at Close and
// calls of no journey at once; as a tree, each task's calls are indented
// from their least depth.
func TestJourneys(t *testing.T) {
	mkCall := func(ts uint64, fn string, track uint64, depth int, flags call.CallFlags, args ...call.Value) call.Call {
		return call.Call{TS: ts, Duration: 1000, PID: 7, TID: 7, Comm: "nc", Func: fn, Track: track, Depth: depth, Flags: flags, Args: args}
	}
	reason := call.Value{Kind: call.KindEnum, Name: "reason", Str: "SKB_DROP_REASON_NO_SOCKET", Bits: 3}
	calls := []call.Call{
		// Exits come innermost first.
		mkCall(20, "skb_clone", 0xa, 5, 0),
		mkCall(10, "__tcp_transmit_skb", 0xa, 4, 0),
		mkCall(30, "tcp_v4_rcv", 0xb, 3, 0),
		mkCall(40, "ip_rcv", 0xc, 3, 0),
		mkCall(52, "kfree_skbmem", 0xa, 6, 0),
		mkCall(51, "sk_skb_reason_drop", 0xa, 5, 0, reason),
		mkCall(50, "tcp_v4_rcv", 0xa, 4, call.TrackEnd),
		mkCall(60, "lost_object", 0, 2, 0),
	}
	for _, tree := range []bool{false, true} {
		var out bytes.Buffer
		j := NewJourneys(&out, Options{}, tree)
		for i := range calls {
			if err := j.Call(&calls[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Flush(); err != nil {
			t.Fatal(err)
		}
		flushed := out.String()
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if strings.Contains(flushed, "journey 0xb") || !strings.Contains(got, "journey 0xb") {
			t.Errorf("tree %v: an open journey is written at Close only:\n%s", tree, got)
		}
		var funcs []string
		for line := range strings.Lines(got) {
			if strings.HasPrefix(line, "journey ") {
				funcs = append(funcs, strings.TrimSpace(line))
				continue
			}
			for _, c := range calls {
				if strings.Contains(line, " "+c.Func+"(") {
					funcs = append(funcs, c.Func)
					break
				}
			}
		}
		want := []string{
			"journey 0xa: 5 calls, ended by tcp_v4_rcv, reason=SKB_DROP_REASON_NO_SOCKET",
			"__tcp_transmit_skb", "skb_clone", "tcp_v4_rcv", "sk_skb_reason_drop", "kfree_skbmem",
			"lost_object",
			"journey 0xb: 1 call, still tracked", "tcp_v4_rcv",
			"journey 0xc: 1 call, still tracked", "ip_rcv",
		}
		if strings.Join(funcs, "\n") != strings.Join(want, "\n") {
			t.Errorf("tree %v: got\n%s\nwant\n%s\noutput:\n%s", tree, strings.Join(funcs, "\n"), strings.Join(want, "\n"), got)
		}
		if tree && !strings.Contains(got, "nc[7]   skb_clone(") {
			t.Errorf("tree: skb_clone not indented one level below __tcp_transmit_skb:\n%s", got)
		}
	}
}

// TestJourneysBounded writes the open journeys once maxOpen calls are
// buffered, before Close.
func TestJourneysBounded(t *testing.T) {
	var out bytes.Buffer
	j := NewJourneys(&out, Options{}, false)
	for i := range maxOpen {
		c := call.Call{TS: uint64(i), Func: "f", Track: uint64(i%1000 + 1)}
		if err := j.Call(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n  "); n != maxOpen || j.buffered != 0 {
		t.Errorf("%d calls written, %d buffered, want all %d written", n, j.buffered, maxOpen)
	}
}
