// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

// oddCalls are calls with what testCalls lacks: floats, booleans, cut
// arrays, marked structs, --show values, chains, journeys, stacks, a
// tracepoint's event and names that need escaping.
func oddCalls() []call.Call {
	arr := call.Value{Kind: call.KindArray, Name: "a", More: 3, Fields: []call.Value{{Kind: call.KindInt, Bits: uint64(^uint64(6) + 1)}, {Kind: call.KindUnknown}}}
	st := call.Value{Kind: call.KindStruct, Name: "s", More: 2, Flags: call.Truncated | call.Cut, Fields: []call.Value{
		{Kind: call.KindFloat, Name: "f", Bits: math.Float64bits(0.25)},
		{Kind: call.KindFloat, Name: "inf", Bits: math.Float64bits(math.Inf(1))},
		{Kind: call.KindBool, Name: "b", Bits: 1},
		{Kind: call.KindArray, Name: "deep", Flags: call.Elided},
		{Kind: call.KindPointer, Name: "p", Bits: 0xffff888000001000},
		{Kind: call.KindPointer, Name: "null"},
	}}
	return []call.Call{
		{TS: t0 + 5, Duration: 77, CPU: 3, PID: 1, TID: 2, Comm: "a\x1b[31m\"b\n", Func: "f", Module: "m",
			Args:  []call.Value{arr, st, {Kind: call.KindString, Name: "name", Str: "tab\there \u2028 é"}},
			Show:  []call.Value{{Kind: call.KindUint, Name: "sk->len", Bits: math.MaxUint64}},
			Ret:   call.Value{Kind: call.KindErrno, Bits: uint64(^uint64(1) + 1), Str: "EPERM"},
			Depth: 2, Chain: 7, Flags: call.Origin | call.Missed | call.TrackEnd, Track: 0xffff888000002000,
			Stack: []string{"f+0x0 [m]", "g+0x12"}},
		{TS: t0 + 9, Func: "g", Flags: call.ExitOnly, Ret: call.Value{Kind: call.KindUnknown}},
		{TS: t0 + 10, Func: "h", Flags: call.EntryOnly, Args: []call.Value{}},
		{TS: t0 + 11, Func: "tp:sched:sched_process_exec", Flags: call.Event, Depth: 1, Args: []call.Value{{Kind: call.KindInt, Name: "old_pid", Bits: 42}}},
	}
}

// TestJSONRoundTrip: calls written as JSON, read back and written again
// give the same bytes.
func TestJSONRoundTrip(t *testing.T) {
	var first bytes.Buffer
	calls := append(append(append(testCalls(t), oddCalls()...), stackCalls()...), userStackCall())
	renderAll(t, render.NewJSON(&first, testOptions), calls)
	r := render.NewJSONReader(bytes.NewReader(first.Bytes()))
	var back []call.Call
	for {
		var c call.Call
		err := r.Read(&c)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		back = append(back, c)
	}
	if r.WallOffset() != wallAt {
		t.Errorf("wall offset %d, want %d", r.WallOffset(), wallAt)
	}
	var second bytes.Buffer
	renderAll(t, render.NewJSON(&second, render.Options{WallOffset: r.WallOffset()}), back)
	if first.String() != second.String() {
		t.Errorf("read back and written again:\n%s\nwant\n%s", second.String(), first.String())
	}
}

func TestJSONReaderErrors(t *testing.T) {
	for in, want := range map[string]string{
		"hello\n":                          "line 1: invalid character 'h'",
		"\n{\"ts\":1,\"func\":\"f\"}\n[1]": "line 3: want '{'",
		`{"ts":1,"func":"f","args":{"x":`:  "line 1: the line ends inside its JSON object (a truncated line?)",
		`{"ts":1}`:                         `line 1: not a call of trawl's JSON output: no "func"`,
		`{"ts":-1,"func":"f"}`:             `line 1: "ts": strconv.ParseUint`,
		`{"func":"f"} {}`:                  "line 1: more than one JSON value",
	} {
		r := render.NewJSONReader(strings.NewReader(in))
		var c call.Call
		var err error
		for err == nil {
			err = r.Read(&c)
		}
		if err == io.EOF || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}
