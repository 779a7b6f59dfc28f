// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/render/rendertest"
	"github.com/trawl-dev/trawl/render"
)

// TestPerfettoProtoAgrees renders calls as a Perfetto protobuf trace and
// as a Chrome JSON trace, decodes both, and checks call by call that the
// protobuf holds what the JSON holds.
func TestPerfettoProtoAgrees(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []call.Call
	}{
		{"golden calls", testCalls(t)},
		{"arguments named like trawl's keys", argNameCalls()},
		{"every kind of value", valueKindCalls()},
		{"stacks, kernel and user", []call.Call{userStackCall()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pbOut, jsonOut bytes.Buffer
			renderAll(t, render.NewPerfettoProto(&pbOut, testOptions), tc.calls)
			renderAll(t, render.NewChromeJSON(&jsonOut), tc.calls)
			t.Logf("%d calls: Perfetto protobuf %d bytes, Chrome render.JSON %d bytes", len(tc.calls), pbOut.Len(), jsonOut.Len())
			trace, err := rendertest.DecodePerfetto(pbOut.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if trace.WallOffset != testOptions.WallOffset {
				t.Errorf("wall-clock offset %d, want %d", trace.WallOffset, testOptions.WallOffset)
			}
			for _, err := range comparePerfetto(trace.Events, jsonOut.Bytes()) {
				t.Error(err)
			}
		})
	}
}

// comparePerfetto compares decoded Perfetto events with the events of a
// Chrome JSON trace of the same calls.
func comparePerfetto(events []rendertest.PerfettoEvent, chromeJSON []byte) []error {
	var file struct{ TraceEvents []json.RawMessage }
	if err := json.Unmarshal(chromeJSON, &file); err != nil {
		return []error{err}
	}
	type jsonEvent struct {
		Name, Cat, Ph string
		TS, Dur       json.Number
		PID, TID      int64
		Args          map[string]any
	}
	names := map[[2]int64]string{} // {pid, tid} -> thread name, {pid, -1} -> process name
	var want []jsonEvent
	for _, raw := range file.TraceEvents {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var e jsonEvent
		if err := d.Decode(&e); err != nil {
			return []error{err}
		}
		switch {
		case e.Name == "process_name" && e.Ph == "M":
			names[[2]int64{e.PID, -1}] = e.Args["name"].(string)
		case e.Name == "thread_name" && e.Ph == "M":
			names[[2]int64{e.PID, e.TID}] = e.Args["name"].(string)
		default:
			want = append(want, e)
		}
	}
	if len(events) != len(want) {
		return []error{fmt.Errorf("%d Perfetto events for %d Chrome render.JSON events", len(events), len(want))}
	}
	var errs []error
	for i, e := range events {
		w := want[i]
		ph, dur := "X", string(render.AppendMicros(nil, e.Dur))
		if e.Instant {
			ph, dur = "i", ""
		}
		got := fmt.Sprintln(e.Name, e.Category, ph, string(render.AppendMicros(nil, e.TS)), dur, e.PID, e.TID, e.Process, e.Thread)
		exp := fmt.Sprintln(w.Name, w.Cat, w.Ph, w.TS, w.Dur, w.PID, w.TID, names[[2]int64{w.PID, -1}], names[[2]int64{w.PID, w.TID}])
		if got != exp {
			errs = append(errs, fmt.Errorf("event %d: name cat ph ts dur pid tid process thread = %q, want %q", i+1, got, exp))
		}
		if !reflect.DeepEqual(e.Args, w.Args) {
			errs = append(errs, fmt.Errorf("event %d (%s): args\n%v\nwant\n%v", i+1, e.Name, e.Args, w.Args))
		}
	}
	return errs
}

// valueKindCalls are calls with values of every kind and shape: marks,
// empty and cut containers, values that are not finite or not valid
// UTF-8, and values long enough to need lengths of two and three bytes.
func valueKindCalls() []call.Call {
	i := func(name string, v int64) call.Value {
		return call.Value{Kind: call.KindInt, Name: name, Bits: uint64(v)}
	}
	str := func(name, s string) call.Value {
		return call.Value{Kind: call.KindString, Name: name, Str: s}
	}
	float := func(name string, x float64) call.Value {
		return call.Value{Kind: call.KindFloat, Name: name, Bits: math.Float64bits(x)}
	}
	return []call.Call{
		{TS: 1_000_000_000, Duration: 1500, CPU: 1, PID: 100, TID: 100, Comm: "bad\xffcomm", Func: "kinds",
			Args: []call.Value{
				i("neg", -100),
				{Kind: call.KindUint, Name: "max", Bits: math.MaxUint64},
				{Kind: call.KindBool, Name: "yes", Bits: 1},
				{Kind: call.KindBool, Name: "no"},
				float("pi", 3.25), float("nan", math.NaN()), float("inf", math.Inf(-1)),
				{Kind: call.KindEnum, Name: "state", Str: "TCP_ESTABLISHED", Bits: 1},
				{Kind: call.KindEnum, Name: "state2", Str: "TCP_ESTABLISHED", Bits: 1},
				{Kind: call.KindEnum, Name: "anon", Bits: 77},
				str("utf8", "é ✓"), str("invalid", "a\xff\xfeb"), str("empty", ""),
				{Kind: call.KindBytes, Name: "raw", Str: "\x00\xff\x10", More: 2},
				{Kind: call.KindPointer, Name: "null"},
				{Kind: call.KindPointer, Name: "plain", Bits: 0xffff888001234000},
				{Kind: call.KindPointer, Name: "sym", Str: "ext4_file_operations", Bits: 0xffffffff82016e40},
				{Kind: call.KindPointer, Name: "symoff", Str: "tcp_prot", Off: 0x10, Bits: 0xffffffff81c8e510},
				{Kind: call.KindUnknown, Name: "gone"},
				{Kind: call.KindStruct, Name: "emptystruct"},
				{Kind: call.KindArray, Name: "emptyarray"},
				{Kind: call.KindArray, Name: "elidedarray", Flags: call.Elided},
				{Kind: call.KindStruct, Name: "cutstruct", Flags: call.Cut},
				{Kind: call.KindArray, Name: "cut", Fields: []call.Value{i("", 1), {Kind: call.KindUnknown}, i("", -2)}, More: 6},
				{Kind: call.KindArray, Name: "onlymore", More: 3},
				{Kind: call.KindArray, Name: "nested", Fields: []call.Value{
					{Kind: call.KindArray, Fields: []call.Value{i("", 1)}},
					{Kind: call.KindStruct, Fields: []call.Value{i("a", 1)}},
				}},
				{Kind: call.KindStruct, Name: "marks", Flags: call.Truncated, More: 4, Fields: []call.Value{
					{Kind: call.KindStruct, Name: "deep", Flags: call.Elided},
					i("x", 5),
				}},
				{Kind: call.KindStruct, Name: "long", Fields: []call.Value{
					str("s300", strings.Repeat("x", 300)),
					str("s20000", strings.Repeat("y", 20000)),
				}},
				i("", 7), // no BTF name: argN
			},
			Ret: call.Value{Kind: call.KindErrno, Bits: uint64(1<<64 - 600)}},
		{TS: 1_000_002_000, Duration: 2_345_678, CPU: 0, PID: 100, TID: 101, Comm: "worker", Func: "noargs",
			Ret: call.Value{Kind: call.KindPointer, Bits: 0x7f0000001000}},
		{TS: 1_000_002_500, Duration: 800, CPU: 0, PID: 100, TID: 101, Comm: "worker", Func: "kinds", Depth: 1,
			Args: []call.Value{{Kind: call.KindEnum, Name: "state", Str: "TCP_CLOSE", Bits: 7}}},
		{TS: 1_000_004_000, CPU: 1, PID: 0, TID: 0, Comm: "swapper/1", Func: "nf_hook_slow", Module: "nf_tables", Flags: call.ExitOnly | call.Missed,
			Ret: i("", 1)},
		{TS: 1_000_005_000, CPU: 2, PID: 0, TID: 0, Comm: "swapper/2", Func: "nf_hook_slow", Module: "nf_tables", Flags: call.EntryOnly,
			Args: []call.Value{i("pf", 2)}},
	}
}

// writes records each Write.
type writes [][]byte

func (w *writes) Write(b []byte) (int, error) {
	*w = append(*w, bytes.Clone(b))
	return len(b), nil
}

// TestPerfettoProtoCut checks that a call and a Flush make one Write and
// that the file cut after any Write, as when trawl is killed, is a valid
// trace of the calls rendered until then.
func TestPerfettoProtoCut(t *testing.T) {
	calls := testCalls(t)
	var w writes
	r := render.NewPerfettoProto(&w, testOptions)
	var file []byte
	var cuts []*rendertest.PerfettoTrace
	for i := range calls {
		if err := r.Call(&calls[i]); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(w) != i+1 {
			t.Fatalf("%d writes after %d calls, want one per call", len(w), i+1)
		}
		file = append(file, w[i]...)
		trace, err := rendertest.DecodePerfetto(file)
		if err != nil {
			t.Fatalf("cut after call %d: %v", i+1, err)
		}
		cuts = append(cuts, trace)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if len(w) != len(calls) {
		t.Errorf("Close wrote %d times", len(w)-len(calls))
	}
	full, err := rendertest.DecodePerfetto(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, cut := range cuts {
		if !reflect.DeepEqual(cut.Events, full.Events[:i+1]) {
			t.Errorf("cut after call %d:\n%+v\nwant the first %d events of the whole trace:\n%+v", i+1, cut.Events, i+1, full.Events[:i+1])
		}
	}
	if _, err := rendertest.DecodePerfetto(file[:len(file)-1]); err == nil {
		t.Error("a trace cut inside a packet decodes: the test cannot tell a cut at a packet boundary from one inside")
	}
}

// TestPerfettoProtoSize checks that a long trace is much smaller as
// Perfetto protobuf than as Chrome JSON.
func TestPerfettoProtoSize(t *testing.T) {
	var calls []call.Call
	for round := range uint64(100) {
		for _, c := range testCalls(t) {
			c.TS += round * 1e9
			calls = append(calls, c)
		}
	}
	var pbOut, jsonOut bytes.Buffer
	renderAll(t, render.NewPerfettoProto(&pbOut, testOptions), calls)
	renderAll(t, render.NewChromeJSON(&jsonOut), calls)
	t.Logf("%d calls: Perfetto protobuf %d bytes, Chrome render.JSON %d bytes (%.0f%%)", len(calls), pbOut.Len(), jsonOut.Len(), 100*float64(pbOut.Len())/float64(jsonOut.Len()))
	if pbOut.Len() > jsonOut.Len()/2 {
		t.Errorf("Perfetto protobuf %d bytes, over half of Chrome render.JSON's %d", pbOut.Len(), jsonOut.Len())
	}
}

func TestPerfettoProtoEmpty(t *testing.T) {
	var out bytes.Buffer
	if err := render.NewPerfettoProto(&out, testOptions).Close(); err != nil {
		t.Fatal(err)
	}
	trace, err := rendertest.DecodePerfetto(out.Bytes())
	if err != nil || len(trace.Events) != 0 {
		t.Errorf("empty trace %x: %v", out.Bytes(), err)
	}
}

// TestPerfettoProtoInternLimit checks that symbols are written as strings
// once the table of interned strings is full.
func TestPerfettoProtoInternLimit(t *testing.T) {
	calls := valueKindCalls()
	var pbOut, jsonOut bytes.Buffer
	r := render.NewPerfettoProto(&pbOut, testOptions)
	render.FillInternedStrings(r)
	renderAll(t, r, calls)
	renderAll(t, render.NewChromeJSON(&jsonOut), calls)
	trace, err := rendertest.DecodePerfetto(pbOut.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range comparePerfetto(trace.Events, jsonOut.Bytes()) {
		t.Error(err)
	}
	if render.Interned(r, "tcp_prot+0x10") {
		t.Error("the symbol was interned past the limit")
	}
}
