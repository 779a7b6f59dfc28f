// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/render/rendertest"
	"github.com/trawl-dev/trawl/render"
)

// eventCalls is a tracepoint's event inside a call, in completion order:
// tp:skb:kfree_skb fired 1 µs into sk_skb_reason_drop, at depth 1.
func eventCalls(t *testing.T) []call.Call {
	b := newBuilder(t)
	event := call.Call{
		TS: t0 + 31000, Depth: 1, CPU: 2, PID: 300, TID: 301, Comm: "udp", Func: "tp:skb:kfree_skb", Flags: call.Event,
		Args: []call.Value{
			{Kind: call.KindPointer, Name: "skb", Bits: 0xffff888006e3a900},
			{Kind: call.KindEnum, Name: "reason", Str: "SKB_DROP_REASON_NO_SOCKET", Bits: 3},
		},
	}
	parent := b.call(call.Call{TS: t0 + 30000, Duration: 2500, CPU: 2, PID: 300, TID: 301, Comm: "udp"},
		"sk_skb_reason_drop", 0,
		arg{slot: 0}, arg{slot: 0xffff888006e3a900}, arg{slot: 3})
	return []call.Call{event, parent}
}

// TestTreeEvent draws a tracepoint's event inside the call it happened
// in, indented one level, without a duration or a return value.
func TestTreeEvent(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewTree(&out, testOptions), eventCalls(t))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		"22:13:20.000030 udp[300/301] cpu 2",
		"     2.5µs  sk_skb_reason_drop(sk=NULL, skb=0xffff888006e3a900, reason=SKB_DROP_REASON_NO_SOCKET)",
		"              tp:skb:kfree_skb(skb=0xffff888006e3a900, reason=SKB_DROP_REASON_NO_SOCKET)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("tree:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
}

// TestTimelineEvent writes a tracepoint's event as an instant event on its
// thread's track, within the slice of its call, in Chrome JSON and
// Perfetto alike, with "kind":"tracepoint".
func TestTimelineEvent(t *testing.T) {
	var pbOut, jsonOut bytes.Buffer
	renderAll(t, render.NewPerfettoProto(&pbOut, testOptions), eventCalls(t))
	renderAll(t, render.NewChromeJSON(&jsonOut), eventCalls(t))

	var file struct {
		TraceEvents []struct {
			Name, Ph, S string
			TS          json.Number
			TID         int64
			Args        map[string]any
		}
	}
	if err := json.Unmarshal(jsonOut.Bytes(), &file); err != nil {
		t.Fatalf("%v:\n%s", err, jsonOut.String())
	}
	found := false
	for _, e := range file.TraceEvents {
		if e.Name != "tp:skb:kfree_skb" {
			continue
		}
		found = true
		if e.Ph != "i" || e.S != "t" || e.TS != "1000000031.000" || e.TID != 301 {
			t.Errorf("Chrome JSON event: ph %q s %q ts %s tid %d, want an instant on thread 301 at 1000000031.000", e.Ph, e.S, e.TS, e.TID)
		}
		if e.Args["kind"] != "tracepoint" || e.Args["flags"] != nil {
			t.Errorf("Chrome JSON event args %v, want kind tracepoint and no flags", e.Args)
		}
	}
	if !found {
		t.Errorf("no event in the Chrome JSON:\n%s", jsonOut.String())
	}

	trace, err := rendertest.DecodePerfetto(pbOut.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var slice, instant *rendertest.PerfettoEvent
	for i := range trace.Events {
		switch e := &trace.Events[i]; e.Name {
		case "sk_skb_reason_drop":
			slice = e
		case "tp:skb:kfree_skb":
			instant = e
		}
	}
	if slice == nil || instant == nil {
		t.Fatalf("Perfetto events %+v, want the call and the event", trace.Events)
	}
	if !instant.Instant || instant.TID != slice.TID || instant.TS < slice.TS || instant.TS > slice.TS+slice.Dur {
		t.Errorf("Perfetto event %+v, want an instant within the slice %+v", instant, slice)
	}
	if instant.Args["kind"] != "tracepoint" || instant.Args["flags"] != nil {
		t.Errorf("Perfetto event args %v, want kind tracepoint and no flags", instant.Args)
	}
	for _, err := range comparePerfetto(trace.Events, jsonOut.Bytes()) {
		t.Error(err)
	}
}
