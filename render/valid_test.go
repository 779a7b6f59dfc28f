// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/render/rendertest"
	"github.com/trawl-dev/trawl/render"
)

// TestJSONValid checks that every line is a JSON object holding the schema's
// required keys with the values of the call.
func TestJSONValid(t *testing.T) {
	calls := testCalls(t)
	var out bytes.Buffer
	renderAll(t, render.NewJSON(&out, render.Options{}), calls)
	sc := bufio.NewScanner(&out)
	i := 0
	for ; sc.Scan(); i++ {
		var obj struct {
			TS       *uint64        `json:"ts"`
			CPU      *uint32        `json:"cpu"`
			TID      *uint32        `json:"tid"`
			Func     string         `json:"func"`
			Args     map[string]any `json:"args"`
			Duration uint64         `json:"duration_ns"`
		}
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, sc.Bytes())
		}
		c := &calls[i]
		if obj.TS == nil || *obj.TS != c.TS || obj.CPU == nil || obj.TID == nil || *obj.TID != c.TID || obj.Func != c.Func || obj.Duration != c.Duration {
			t.Errorf("line %d does not match its call: %s", i+1, sc.Bytes())
		}
		if c.Flags&call.ExitOnly == 0 && len(obj.Args) != len(c.Args) {
			t.Errorf("line %d: %d args, want %d", i+1, len(obj.Args), len(c.Args))
		}
	}
	if i != len(calls) {
		t.Errorf("%d lines for %d calls", i, len(calls))
	}
}

// traceEvent is an event of the Chrome trace event format.
type traceEvent struct {
	Name string          `json:"name"`
	Ph   string          `json:"ph"`
	TS   *float64        `json:"ts"`
	Dur  *float64        `json:"dur"`
	PID  *int64          `json:"pid"`
	TID  *int64          `json:"tid"`
	S    string          `json:"s"`
	Args json.RawMessage `json:"args"`
}

// TestChromeJSONValid checks the file against the Trace Event Format: a JSON
// object with a traceEvents array, the fields each phase requires, times in
// µs, and slices that nest on each thread.
func TestChromeJSONValid(t *testing.T) {
	calls := testCalls(t)
	var out bytes.Buffer
	renderAll(t, render.NewChromeJSON(&out), calls)
	var file struct {
		TraceEvents     []traceEvent `json:"traceEvents"`
		DisplayTimeUnit string       `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(out.Bytes(), &file); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	if file.DisplayTimeUnit != "ns" && file.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit %q", file.DisplayTimeUnit)
	}
	type thread struct{ pid, tid int64 }
	slicesOf := map[thread][]traceEvent{}
	named := map[thread]bool{}
	n := 0
	for _, e := range file.TraceEvents {
		if e.Name == "" || e.PID == nil || e.TID == nil {
			t.Fatalf("event without name, pid or tid: %+v", e)
		}
		th := thread{*e.PID, *e.TID}
		switch e.Ph {
		case "M":
			var args struct{ Name string }
			if err := json.Unmarshal(e.Args, &args); err != nil || args.Name == "" {
				t.Errorf("metadata without a name: %s", e.Args)
			}
			if e.Name == "thread_name" {
				named[th] = true
			}
		case "X":
			if e.TS == nil || e.Dur == nil || *e.Dur < 0 {
				t.Errorf("complete event without ts or dur: %+v", e)
			}
			slicesOf[th] = append(slicesOf[th], e)
			checkSliceArgs(t, e, calls, n)
			n++
		case "i":
			if e.TS == nil || (e.S != "t" && e.S != "p" && e.S != "g") {
				t.Errorf("instant event without ts or scope: %+v", e)
			}
			checkSliceArgs(t, e, calls, n)
			n++
		default:
			t.Errorf("unexpected phase %q", e.Ph)
		}
		if e.Ph != "M" && !named[th] {
			t.Errorf("thread %v has no thread_name before its events", th)
		}
	}
	if n != len(calls) {
		t.Errorf("%d events for %d calls", n, len(calls))
	}
	if got, want := *slicesOf[thread{4242, 4242}][0].TS, float64(calls[1].TS)/1000; got != want {
		t.Errorf("ts %v µs, want %v", got, want)
	}
	for th, ss := range slicesOf {
		slices.SortStableFunc(ss, func(a, b traceEvent) int {
			if *a.TS != *b.TS {
				return compareFloat(*a.TS, *b.TS)
			}
			return compareFloat(*b.Dur, *a.Dur) // the longer, outer slice first
		})
		var ends []float64 // stack of the open slices' ends
		for _, s := range ss {
			for len(ends) > 0 && ends[len(ends)-1] <= *s.TS {
				ends = ends[:len(ends)-1]
			}
			end := *s.TS + *s.Dur
			if len(ends) > 0 && end > ends[len(ends)-1] {
				t.Errorf("thread %v: slice %s overlaps its parent", th, s.Name)
			}
			ends = append(ends, end)
		}
	}
}

// checkSliceArgs checks that the args of e, the event of calls[n], hold the
// call's CPU and its arguments in an object of their own, absent for an
// exit-only call.
func checkSliceArgs(t *testing.T, e traceEvent, calls []call.Call, n int) {
	t.Helper()
	if n >= len(calls) {
		return // counted after the loop
	}
	c := &calls[n]
	var args struct {
		Args map[string]json.RawMessage `json:"args"`
		CPU  *uint32                    `json:"cpu"`
	}
	if err := json.Unmarshal(e.Args, &args); err != nil {
		t.Errorf("%s: args: %v: %s", e.Name, err, e.Args)
		return
	}
	if args.CPU == nil || *args.CPU != c.CPU {
		t.Errorf("%s: args without the CPU %d: %s", e.Name, c.CPU, e.Args)
	}
	switch {
	case c.Flags&call.ExitOnly != 0 && args.Args != nil:
		t.Errorf("%s: exit-only call with arguments: %s", e.Name, e.Args)
	case c.Flags&call.ExitOnly == 0 && (args.Args == nil || len(args.Args) != len(c.Args)):
		t.Errorf("%s: %d arguments in args.args, want %d: %s", e.Name, len(args.Args), len(c.Args), e.Args)
	}
}

// argNameCalls are calls whose arguments are named like the keys trawl
// adds to a slice's args: the kernel has functions with an int cpu or an
// unsigned long flags.
func argNameCalls() []call.Call {
	return []call.Call{{
		TS: 1000, Duration: 500, CPU: 3, PID: 10, TID: 11, Comm: "t", Func: "f", Flags: call.Missed,
		Args: []call.Value{
			{Kind: call.KindInt, Name: "cpu", Bits: 7},
			{Kind: call.KindEnum, Name: "flags", Str: "GFP_KERNEL", Bits: 0xcc0},
			{Kind: call.KindInt, Name: "ret", Bits: 42},
			{Kind: call.KindString, Name: "errno", Str: "not a name"},
			{Kind: call.KindUint, Name: "args", Bits: 9},
		},
		Ret: call.Value{Kind: call.KindErrno, Str: "ENOENT", Bits: uint64(1<<64 - 2)},
	}, {
		TS: 2000, CPU: 5, PID: 10, TID: 11, Comm: "t", Func: "g", Flags: call.EntryOnly,
		Args: []call.Value{
			{Kind: call.KindInt, Name: "cpu", Bits: 1},
			{Kind: call.KindUint, Name: "flags", Bits: 2},
		},
	}}
}

// TestChromeJSONArgNames renders argNameCalls and checks that no key is
// written twice and that every value survives.
func TestChromeJSONArgNames(t *testing.T) {
	calls := argNameCalls()
	want := []string{
		`{"args":{"args":9,"cpu":7,"errno":"not a name","flags":"GFP_KERNEL","ret":42},"cpu":3,"errno":"ENOENT","flags":["missed"],"ret":-2}`,
		`{"args":{"cpu":1,"flags":2},"cpu":5,"flags":["entry_only"]}`,
	}
	var out bytes.Buffer
	renderAll(t, render.NewChromeJSON(&out), calls)
	var file struct{ TraceEvents []traceEvent }
	if err := json.Unmarshal(out.Bytes(), &file); err != nil {
		t.Fatalf("not valid JSON: %v\n%s", err, out.Bytes())
	}
	var got []json.RawMessage
	for _, e := range file.TraceEvents {
		if e.Ph == "M" {
			continue
		}
		if dups := rendertest.DuplicateKeys(e.Args); len(dups) > 0 {
			t.Errorf("%s: args has keys %q twice: one value hides the other: %s", e.Name, dups, e.Args)
		}
		got = append(got, e.Args)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events for %d calls:\n%s", len(got), len(want), out.Bytes())
	}
	for i := range want {
		// Unmarshal keeps one value of a duplicate key; marshalling the map
		// again sorts the keys.
		var m map[string]any
		if err := json.Unmarshal(got[i], &m); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		if string(b) != want[i] {
			t.Errorf("call %s: args %s\nwant %s", calls[i].Func, got[i], want[i])
		}
	}
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestChromeJSONEmpty(t *testing.T) {
	var out bytes.Buffer
	if err := render.NewChromeJSON(&out).Close(); err != nil {
		t.Fatal(err)
	}
	var file struct{ TraceEvents []traceEvent }
	if err := json.Unmarshal(out.Bytes(), &file); err != nil || file.TraceEvents == nil {
		t.Errorf("empty trace %q: %v", out.String(), err)
	}
}
