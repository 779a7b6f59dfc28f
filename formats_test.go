// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	pb "github.com/trawl-dev/trawl/internal/render/perfettopb"
	"github.com/trawl-dev/trawl/internal/render/rendertest"
	"github.com/trawl-dev/trawl/render"
)

// TestFormatsCheckCatchesChanges makes sure checkFormats notices a renderer
// that drops or alters a call, on calls made up to cover every kind of
// value.
func TestFormatsCheckCatchesChanges(t *testing.T) {
	calls := madeUpCalls()
	out, err := renderAll(calls)
	if err != nil {
		t.Fatal(err)
	}
	if errs := checkFormats(calls, out); len(errs) > 0 {
		t.Fatalf("unchanged output: %v\ntext:\n%s", errs, out.text)
	}
	dropLine := func(b []byte, i int) []byte {
		lines := bytes.SplitAfter(b, []byte("\n"))
		return bytes.Join(slices.Delete(lines, i, i+1), nil)
	}
	changes := []struct {
		name   string
		change func(o *formatOutputs)
	}{
		{"text drops a call", func(o *formatOutputs) { o.text = dropLine(o.text, 1) }},
		{"text alters an argument", func(o *formatOutputs) { o.text = bytes.Replace(o.text, []byte("len=4096"), []byte("len=4097"), 1) }},
		{"text alters a string", func(o *formatOutputs) {
			o.text = bytes.Replace(o.text, []byte(`"/etc/passwd"`), []byte(`"/etc/passwe"`), 1)
		}},
		{"text alters a duration", func(o *formatOutputs) { o.text = bytes.Replace(o.text, []byte("1.5µs"), []byte("1.6µs"), 1) }},
		{"tree drops a call", func(o *formatOutputs) { o.tree = dropLine(o.tree, 2) }},
		{"tree alters a nested member", func(o *formatOutputs) { o.tree = bytes.Replace(o.tree, []byte("mode=0x1a4"), []byte("mode=0x1a5"), 1) }},
		{"json drops a call", func(o *formatOutputs) { o.json = dropLine(o.json, 0) }},
		{"json alters a return value", func(o *formatOutputs) {
			o.json = bytes.Replace(o.json, []byte(`"errno":"ENOENT"`), []byte(`"errno":"EPERM"`), 1)
		}},
		{"chrome json alters a start", func(o *formatOutputs) {
			o.chromeJSON = bytes.Replace(o.chromeJSON, []byte(`"ts":1000000.000`), []byte(`"ts":1000000.001`), 1)
		}},
		{"chrome json drops a call", func(o *formatOutputs) {
			o.chromeJSON = bytes.Replace(o.chromeJSON, []byte(`{"name":"vfs_read","cat":"vmlinux","ph":"i"`), []byte(`{"name":"vfs_read","cat":"vmlinux","ph":"M"`), 1)
		}},
		{"chrome json alters an argument", func(o *formatOutputs) {
			o.chromeJSON = bytes.Replace(o.chromeJSON, []byte(`"len":4096`), []byte(`"len":4095`), 1)
		}},
		{"chrome json alters an argument named cpu", func(o *formatOutputs) {
			o.chromeJSON = bytes.Replace(o.chromeJSON, []byte(`"cpu":5`), []byte(`"cpu":6`), 1)
		}},
		{"chrome json drops an argument", func(o *formatOutputs) {
			o.chromeJSON = bytes.Replace(o.chromeJSON, []byte(`,"count":31`), nil, 1)
		}},
		{"perfetto alters a start", func(o *formatOutputs) {
			o.perfetto = editTrace(o.perfetto, func(tr *pb.Trace) {
				for _, p := range tr.Packet {
					if p.GetTrackEvent().GetType() == pb.TrackEvent_TYPE_SLICE_BEGIN {
						*p.Timestamp-- // and the duration grows by 1 ns
						return
					}
				}
			})
		}},
		{"perfetto drops a call", func(o *formatOutputs) {
			o.perfetto = editTrace(o.perfetto, func(tr *pb.Trace) {
				for i, p := range tr.Packet {
					if p.GetTrackEvent().GetType() == pb.TrackEvent_TYPE_INSTANT {
						tr.Packet = slices.Delete(tr.Packet, i, i+1)
						return
					}
				}
			})
		}},
		{"perfetto alters an argument", func(o *formatOutputs) {
			o.perfetto = editAnnotation(o.perfetto, func(a *pb.DebugAnnotation) bool {
				if a.GetUintValue() != 4096 {
					return false
				}
				a.Value = &pb.DebugAnnotation_UintValue{UintValue: 4095}
				return true
			})
		}},
		{"perfetto alters an argument named cpu", func(o *formatOutputs) {
			o.perfetto = editAnnotation(o.perfetto, func(a *pb.DebugAnnotation) bool {
				if a.GetIntValue() != 5 {
					return false
				}
				a.Value = &pb.DebugAnnotation_IntValue{IntValue: 6}
				return true
			})
		}},
		{"perfetto drops an argument", func(o *formatOutputs) {
			o.perfetto = editAnnotation(o.perfetto, func(a *pb.DebugAnnotation) bool {
				for i, e := range a.GetDictEntries() {
					if e.GetIntValue() == 31 {
						a.DictEntries = slices.Delete(a.DictEntries, i, i+1)
						return true
					}
				}
				return false
			})
		}},
		{"stats miscounts", func(o *formatOutputs) {
			o.stats = bytes.Replace(o.stats, []byte("          2 "), []byte("          3 "), 1)
		}},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			changed := out
			c.change(&changed)
			if reflect.DeepEqual(changed, out) {
				t.Fatal("the change changed nothing: fix the test")
			}
			if errs := checkFormats(calls, changed); len(errs) == 0 {
				t.Error("checkFormats found no difference")
			}
		})
	}
}

// madeUpCalls are calls with values of every kind the renderers show.
func madeUpCalls() []trawl.Call {
	i := func(name string, v int64) call.Value {
		return call.Value{Kind: call.KindInt, Name: name, Bits: uint64(v)}
	}
	str := func(name, s string) call.Value { return call.Value{Kind: call.KindString, Name: name, Str: s} }
	return []trawl.Call{
		{TS: 1_000_000_000, Duration: 1500, CPU: 1, PID: 100, TID: 100, Comm: "cat", Func: "do_sys_openat2",
			Args: []call.Value{i("dfd", -100), str("filename", "/etc/passwd"), {Kind: call.KindStruct, Name: "how", Fields: []call.Value{
				{Kind: call.KindUint, Name: "flags", Flags: call.Hex, Bits: 0x8000},
				{Kind: call.KindUint, Name: "mode", Flags: call.Hex, Bits: 0o644},
				{Kind: call.KindStruct, Name: "inner", Flags: call.Elided},
			}, More: 1}},
			Ret: call.Value{Kind: call.KindErrno, Str: "ENOENT", Bits: uint64(0xfffffffffffffffe)}},
		{TS: 1_000_002_000, Duration: 2_345_678, CPU: 0, PID: 100, TID: 101, Comm: "cat worker", Func: "do_mmap", Depth: 0,
			Args: []call.Value{
				{Kind: call.KindPointer, Name: "file", Bits: 0xffff888001234000},
				{Kind: call.KindPointer, Name: "uf", Bits: 0},
				{Kind: call.KindPointer, Name: "ops", Str: "ext4_file_operations", Off: 0x10, Bits: 0xffffffff82000010},
				{Kind: call.KindUint, Name: "len", Bits: 4096},
				{Kind: call.KindEnum, Name: "how", Str: "A|B", Bits: 3},
				{Kind: call.KindBool, Name: "populate", Bits: 1},
				{Kind: call.KindBytes, Name: "raw", Str: "\x00\xff\x10", More: 2},
				{Kind: call.KindArray, Name: "vec", Fields: []call.Value{i("", 1), i("", -2)}, More: 6},
				{Kind: call.KindUnknown, Name: "gone"},
				i("", 7),
				// named like keys the Perfetto renderer adds
				i("cpu", 5),
				{Kind: call.KindUint, Name: "flags", Flags: call.Hex, Bits: 0x22},
			},
			Ret: call.Value{Kind: call.KindUint, Flags: call.Hex, Bits: 0x7f0000001000}},
		{TS: 1_000_002_500, Duration: 800, CPU: 0, PID: 100, TID: 101, Comm: "cat worker", Func: "vfs_read", Depth: 1,
			Args: []call.Value{str("buf", "a \"quoted\"\n0x1f"), i("count", 0x1f)}, Ret: i("", 12)},
		{TS: 1_000_003_000, CPU: 1, PID: 100, TID: 100, Comm: "cat", Func: "vfs_read", Flags: call.EntryOnly,
			Args: []call.Value{str("buf", ""), i("count", 1)}},
		{TS: 1_000_004_000, CPU: 1, PID: 0, TID: 0, Comm: "swapper/1", Func: "nf_hook_slow", Module: "nf_tables", Flags: call.ExitOnly,
			Ret: i("", 1)},
	}
}

// formatOutputs are one list of calls rendered in every format.
type formatOutputs struct {
	text, tree, json, chromeJSON, perfetto, stats []byte
}

// renderAll renders calls in every format, with times of the kernel clock.
func renderAll(calls []trawl.Call) (formatOutputs, error) {
	var text, tree, js, chromeJSON, perfetto, stats bytes.Buffer
	st, err := render.NewStats(&stats, render.StatsOptions{})
	if err != nil {
		return formatOutputs{}, err
	}
	renderers := []render.Renderer{
		render.NewText(&text, render.Options{}),
		render.NewTree(&tree, render.Options{}),
		render.NewJSON(&js, render.Options{}),
		render.NewChromeJSON(&chromeJSON),
		render.NewPerfettoProto(&perfetto, render.Options{}),
		st,
	}
	for _, r := range renderers {
		for i := range calls {
			c := calls[i] // a renderer may not keep c
			if err := r.Call(&c); err != nil {
				return formatOutputs{}, err
			}
		}
		if err := r.Close(); err != nil {
			return formatOutputs{}, err
		}
	}
	return formatOutputs{text.Bytes(), tree.Bytes(), js.Bytes(), chromeJSON.Bytes(), perfetto.Bytes(), stats.Bytes()}, nil
}

// checkFormats checks the JSON lines against calls, then every other
// format against the JSON lines, and returns the differences.
func checkFormats(calls []trawl.Call, out formatOutputs) []error {
	objs, err := parseJSONLines(out.json)
	if err != nil {
		return []error{err}
	}
	errs := checkJSON(calls, objs)
	if len(errs) > 0 {
		return errs // the reference itself is wrong
	}
	textCalls, textErrs := checkText(objs, out.text)
	errs = append(errs, textErrs...)
	if textCalls != nil {
		errs = append(errs, checkTree(objs, textCalls, out.tree)...)
	}
	errs = append(errs, checkChromeJSON(objs, out.chromeJSON)...)
	errs = append(errs, checkPerfetto(objs, out.perfetto)...)
	errs = append(errs, checkStats(calls, objs, out.stats)...)
	return errs
}

func parseJSONLines(b []byte) ([]map[string]any, error) {
	var objs []map[string]any
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		m, err := decodeJSON(line)
		if err != nil {
			return nil, fmt.Errorf("json line %d: %w", i+1, err)
		}
		objs = append(objs, m)
	}
	return objs, nil
}

// decodeJSON decodes an object keeping numbers exact.
func decodeJSON(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	err := d.Decode(&m)
	return m, err
}

// num returns a JSON number as an exact decimal string, "" if absent.
func num(v any) string {
	n, _ := v.(json.Number)
	return string(n)
}

// checkJSON checks that each JSON line is the call at the same index.
func checkJSON(calls []trawl.Call, objs []map[string]any) []error {
	if len(objs) != len(calls) {
		return []error{fmt.Errorf("json: %d lines for %d calls", len(objs), len(calls))}
	}
	var errs []error
	for i := range calls {
		c, o := &calls[i], objs[i]
		dur := ""
		if c.Duration != 0 {
			dur = fmt.Sprint(c.Duration)
		}
		got := fmt.Sprintln(num(o["ts"]), num(o["pid"]), num(o["tid"]), num(o["cpu"]), num(o["depth"]), num(o["duration_ns"]), o["comm"], o["func"])
		want := fmt.Sprintln(c.TS, c.PID, c.TID, c.CPU, c.Depth, dur, c.Comm, c.Func)
		if got != want {
			errs = append(errs, fmt.Errorf("json line %d: ts pid tid cpu depth duration comm func = %q, want %q", i+1, got, want))
		}
		if args, _ := o["args"].(map[string]any); len(args) != len(c.Args) {
			errs = append(errs, fmt.Errorf("json line %d (%s): %d args, want %d", i+1, c.Func, len(args), len(c.Args)))
		}
	}
	return errs
}

// textCall is the part of a text line the tree shows too.
type textCall struct {
	tid, depth int
	call, dur  string
}

// checkText parses each text line and compares it with the JSON line of
// the same index. It returns the lines' call parts for checkTree.
func checkText(objs []map[string]any, text []byte) ([]textCall, []error) {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(lines) != len(objs) {
		return nil, []error{fmt.Errorf("text: %d lines for %d calls", len(lines), len(objs))}
	}
	var errs []error
	var parts []textCall
	for i, line := range lines {
		o := objs[i]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("text line %d %q: %s", i+1, line, fmt.Sprintf(format, args...)))
		}
		fn := o["func"].(string)
		if m, ok := o["module"].(string); ok {
			fn = m + ":" + fn
		}
		at := strings.Index(line, " "+fn+"(")
		if at < 0 {
			fail("no %s(", fn)
			continue
		}
		ts, _ := strconv.ParseUint(num(o["ts"]), 10, 64)
		if want := fmt.Sprintf("%d.%06d %s", ts/1e9, ts%1e9/1e3, task(o)); line[:at] != want {
			fail("starts with %q, want %q", line[:at], want)
		}
		p := &textParser{s: line, pos: at + len(fn) + 2}
		args, ret, err := p.call(o)
		if err != nil {
			fail("%v", err)
			continue
		}
		if want := canonArgs(o); !reflect.DeepEqual(args, want) {
			fail("args %v, want %v", args, want)
		}
		if want := canonRet(o); !reflect.DeepEqual(ret, want) {
			fail("return value %v, want %v", ret, want)
		}
		end := p.pos
		dur := strings.TrimPrefix(line[end:], " ")
		if err := checkDuration(dur, num(o["duration_ns"])); err != nil {
			fail("%v", err)
		}
		tid, _ := strconv.Atoi(num(o["tid"]))
		depth, _ := strconv.Atoi(num(o["depth"]))
		parts = append(parts, textCall{tid: tid, depth: depth, call: line[at+1 : end], dur: dur})
	}
	return parts, errs
}

// task is comm[pid] or comm[pid/tid], as text and tree show it.
func task(o map[string]any) string {
	if num(o["pid"]) == num(o["tid"]) {
		return fmt.Sprintf("%s[%s]", o["comm"], num(o["pid"]))
	}
	return fmt.Sprintf("%s[%s/%s]", o["comm"], num(o["pid"]), num(o["tid"]))
}

// checkDuration checks a shown duration ("850ns", "12.3µs", "4.5ms",
// "2.1s", one decimal cut, not rounded) against ns, "" meaning none.
func checkDuration(shown, ns string) error {
	if ns == "" {
		if shown != "" {
			return fmt.Errorf("duration %q shown for a call without one", shown)
		}
		return nil
	}
	want, _ := strconv.ParseUint(ns, 10, 64)
	var div uint64
	var digits string
	for _, u := range []struct {
		unit string
		div  uint64
	}{{"ns", 1}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}} {
		if d, ok := strings.CutSuffix(shown, u.unit); ok {
			div, digits = u.div, d
			break
		}
	}
	whole, frac, _ := strings.Cut(digits, ".")
	w, err1 := strconv.ParseUint(whole, 10, 64)
	f, err2 := strconv.ParseUint(cmpOr(frac, "0"), 10, 64)
	if div == 0 || err1 != nil || err2 != nil || len(frac) > 1 {
		return fmt.Errorf("duration %q is not a duration", shown)
	}
	lo := w*div + f*div/10
	hi := lo + max(div/10, 1)
	if want < lo || want >= hi {
		return fmt.Errorf("duration %q, want %d ns", shown, want)
	}
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkTree checks that the tree shows the text's calls, each once, under
// a header naming the task, start and CPU of one of the task's calls,
// indented by depth, with the same duration.
func checkTree(objs []map[string]any, want []textCall, tree []byte) []error {
	var errs []error
	count := map[textCall]int{}
	for _, c := range want {
		count[c]++
	}
	headers := map[string]int{} // header line -> tid
	for _, o := range objs {
		ts, _ := strconv.ParseUint(num(o["ts"]), 10, 64)
		tid, _ := strconv.Atoi(num(o["tid"]))
		headers[fmt.Sprintf("%d.%06d %s cpu %s", ts/1e9, ts%1e9/1e3, task(o), num(o["cpu"]))] = tid
	}
	tid := -1
	sc := bufio.NewScanner(bytes.NewReader(tree))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, " ") {
			var ok bool
			if tid, ok = headers[line]; !ok {
				tid = -1
				errs = append(errs, fmt.Errorf("tree line %d %q: not the header of a call's task", n, line))
			}
			continue
		}
		// The duration column is 10 characters wide, then two spaces and
		// two more per level of depth.
		r := []rune(line)
		if len(r) < 12 || r[10] != ' ' || r[11] != ' ' {
			errs = append(errs, fmt.Errorf("tree line %d %q: no duration column", n, line))
			continue
		}
		rest := string(r[12:])
		call := strings.TrimLeft(rest, " ")
		c := textCall{tid: tid, depth: (len(rest) - len(call)) / 2, call: call, dur: strings.TrimSpace(string(r[:10]))}
		if count[c] == 0 {
			errs = append(errs, fmt.Errorf("tree line %d %q: no such call in the text output (task %d, depth %d)", n, line, c.tid, c.depth))
			continue
		}
		count[c]--
	}
	for c, n := range count {
		if n > 0 {
			errs = append(errs, fmt.Errorf("tree: %d calls missing: %s (task %d, depth %d)", n, c.call, c.tid, c.depth))
		}
	}
	return errs
}

// idleTID mirrors the Perfetto renderers' thread ids for idle tasks.
const idleTID = 1 << 30

// timelineTID returns the thread id of a JSON line's task on a Perfetto
// timeline: each CPU's idle task has its own.
func timelineTID(o map[string]any) string {
	tid := num(o["tid"])
	if tid == "0" {
		cpu, _ := strconv.Atoi(num(o["cpu"]))
		tid = fmt.Sprint(idleTID + cpu)
	}
	return tid
}

// sliceArgs returns what a Perfetto slice's args hold of a JSON line: its
// args object (the call's arguments, absent for exit-only calls), return
// value, errno, CPU and flags, as canonJSON makes them.
func sliceArgs(o map[string]any) map[string]any {
	call := map[string]any{"cpu": num(o["cpu"])}
	for _, k := range []string{"args", "ret", "errno", "flags"} {
		if v, ok := o[k]; ok {
			call[k] = canonJSON(v)
		}
	}
	return call
}

// checkArgs compares a slice's args with a JSON line's.
func checkArgs(format string, i int, o map[string]any, got any) []error {
	var errs []error
	slice, _ := canonJSON(got).(map[string]any)
	call := sliceArgs(o)
	gotArgs, _ := slice["args"].(map[string]any)
	wantArgs, _ := call["args"].(map[string]any)
	for name, v := range wantArgs {
		if g, ok := gotArgs[name]; !ok || !reflect.DeepEqual(g, v) {
			errs = append(errs, fmt.Errorf("%s event %d (%s): argument %s = %v, want %v", format, i+1, o["func"], name, g, v))
		}
	}
	if !reflect.DeepEqual(slice, call) {
		errs = append(errs, fmt.Errorf("%s event %d (%s): args %v, want %v", format, i+1, o["func"], slice, call))
	}
	return errs
}

// checkPerfetto checks that the Perfetto protobuf trace has one slice or
// instant event per call, in order, with the same task, start, duration
// and values, on tracks named after the task.
func checkPerfetto(objs []map[string]any, b []byte) []error {
	trace, err := rendertest.DecodePerfetto(b)
	if err != nil {
		return []error{fmt.Errorf("perfetto: %w", err)}
	}
	if len(trace.Events) != len(objs) {
		return []error{fmt.Errorf("perfetto: %d events for %d calls", len(trace.Events), len(objs))}
	}
	var errs []error
	threads := map[string]string{} // pid/tid -> comm of its first call
	for i, e := range trace.Events {
		o := objs[i]
		cat := "vmlinux"
		if m, ok := o["module"].(string); ok {
			cat = m
		}
		task := num(o["pid"]) + "/" + timelineTID(o)
		if _, ok := threads[task]; !ok {
			threads[task] = o["comm"].(string)
		}
		flags, _ := o["flags"].([]any)
		instant := slices.Contains(flags, any("entry_only")) || slices.Contains(flags, any("exit_only"))
		dur := num(o["duration_ns"])
		if instant {
			dur = ""
		} else if dur == "" {
			dur = "0"
		}
		gotDur := ""
		if !e.Instant {
			gotDur = fmt.Sprint(e.Dur)
		}
		got := fmt.Sprintln(e.Name, e.Category, e.Instant, e.TS, gotDur, fmt.Sprintf("%d/%d", e.PID, e.TID), e.Thread)
		want := fmt.Sprintln(o["func"], cat, instant, num(o["ts"]), dur, task, threads[task])
		if got != want {
			errs = append(errs, fmt.Errorf("perfetto event %d: name cat instant ts dur pid/tid thread = %q, want %q", i+1, got, want))
		}
		errs = append(errs, checkArgs("perfetto", i, o, e.Args)...)
	}
	return errs
}

// editTrace decodes a Perfetto protobuf trace, edits it and encodes it
// again.
func editTrace(b []byte, edit func(*pb.Trace)) []byte {
	var tr pb.Trace
	if err := proto.Unmarshal(b, &tr); err != nil {
		panic(err)
	}
	edit(&tr)
	b, err := proto.Marshal(&tr)
	if err != nil {
		panic(err)
	}
	return b
}

// editAnnotation edits the first debug annotation, at any depth, for
// which edit returns true.
func editAnnotation(b []byte, edit func(*pb.DebugAnnotation) bool) []byte {
	var walk func(anns []*pb.DebugAnnotation) bool
	walk = func(anns []*pb.DebugAnnotation) bool {
		for _, a := range anns {
			if edit(a) || walk(a.DictEntries) || walk(a.ArrayValues) {
				return true
			}
		}
		return false
	}
	return editTrace(b, func(tr *pb.Trace) {
		for _, p := range tr.Packet {
			if walk(p.GetTrackEvent().GetDebugAnnotations()) {
				return
			}
		}
	})
}

// checkChromeJSON checks that the Chrome JSON trace has one slice or
// instant event per call, in order, with the same task, start, duration
// and values.
func checkChromeJSON(objs []map[string]any, b []byte) []error {
	var trace struct{ TraceEvents []json.RawMessage }
	if err := json.Unmarshal(b, &trace); err != nil {
		return []error{fmt.Errorf("chrome json: %w", err)}
	}
	var errs []error
	var events []map[string]any
	for _, raw := range trace.TraceEvents {
		e, err := decodeJSON(raw)
		if err != nil {
			return []error{fmt.Errorf("chrome json event %s: %w", raw, err)}
		}
		if e["ph"] == "M" {
			continue
		}
		var a struct{ Args json.RawMessage }
		json.Unmarshal(raw, &a)
		if dups := rendertest.DuplicateKeys(a.Args); len(dups) > 0 {
			errs = append(errs, fmt.Errorf("chrome json event %d (%s): args has keys %q twice: one value hides the other", len(events)+1, e["name"], dups))
		}
		events = append(events, e)
	}
	if len(events) != len(objs) {
		return append(errs, fmt.Errorf("chrome json: %d events for %d calls", len(events), len(objs)))
	}
	micros := func(ns string) string {
		n, _ := strconv.ParseUint(ns, 10, 64)
		return fmt.Sprintf("%d.%03d", n/1000, n%1000)
	}
	for i, e := range events {
		o := objs[i]
		cat := "vmlinux"
		if m, ok := o["module"].(string); ok {
			cat = m
		}
		flags, _ := o["flags"].([]any)
		ph, dur := "X", micros(num(o["duration_ns"]))
		if slices.Contains(flags, any("entry_only")) || slices.Contains(flags, any("exit_only")) {
			ph, dur = "i", ""
		}
		got := fmt.Sprintln(e["name"], e["cat"], e["ph"], num(e["ts"]), num(e["dur"]), num(e["pid"]), num(e["tid"]))
		want := fmt.Sprintln(o["func"], cat, ph, micros(num(o["ts"])), dur, num(o["pid"]), timelineTID(o))
		if got != want {
			errs = append(errs, fmt.Errorf("chrome json event %d: name cat ph ts dur pid tid = %q, want %q", i+1, got, want))
		}
		errs = append(errs, checkArgs("chrome json", i, o, e["args"])...)
	}
	return errs
}

// checkStats checks the stats table's counts, errors and maximum latency
// per function.
func checkStats(calls []trawl.Call, objs []map[string]any, b []byte) []error {
	type row struct {
		calls, errors int
		max           string // in ns, "" without latency
	}
	want := map[string]*row{}
	for i, c := range calls {
		name := c.Func
		if c.Module != "" {
			name = c.Module + ":" + c.Func
		}
		r := want[name]
		if r == nil {
			r = &row{}
			want[name] = r
		}
		r.calls++
		if c.Ret.Kind == call.KindErrno {
			r.errors++
		}
		if c.Flags&(call.EntryOnly|call.ExitOnly) == 0 {
			if d := num(objs[i]["duration_ns"]); r.max == "" || len(d) > len(r.max) || len(d) == len(r.max) && d > r.max {
				r.max = cmpOr(d, "0")
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "FUNCTION ") {
		return []error{fmt.Errorf("stats: no header in %q", b)}
	}
	var errs []error
	seen := map[string]bool{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 7 {
			errs = append(errs, fmt.Errorf("stats line %q: %d columns, want 7", line, len(f)))
			continue
		}
		name := f[0]
		seen[name] = true
		r := want[name]
		if r == nil {
			errs = append(errs, fmt.Errorf("stats line %q: no call of %s", line, name))
			continue
		}
		if f[1] != fmt.Sprint(r.calls) || f[2] != fmt.Sprint(r.errors) {
			errs = append(errs, fmt.Errorf("stats line %q: %s calls, %s errors, want %d and %d", line, f[1], f[2], r.calls, r.errors))
		}
		maxShown := f[6]
		if maxShown == "-" {
			maxShown = ""
		}
		if err := checkDuration(maxShown, r.max); err != nil {
			errs = append(errs, fmt.Errorf("stats line %q: max: %w", line, err))
		}
	}
	for name := range want {
		if !seen[name] {
			errs = append(errs, fmt.Errorf("stats: no line for %s", name))
		}
	}
	return errs
}

// Canonical values: what text and JSON output must both reduce to. Scalars
// are strings, numbers in decimal (hex and pointer addresses converted);
// nil is NULL or a value not captured; structs are maps with "$more",
// "$truncated" and "$elided" marks; arrays are slices ending with a
// {"$more": N} map when cut.

// canonScalar converts a number (decimal or 0x hex, signed) to decimal and
// leaves other text alone.
func canonScalar(s string) string {
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(s, "-")
	u, err := strconv.ParseUint(digits, 0, 64)
	if err != nil || digits != "0" && strings.HasPrefix(digits, "0") && !strings.HasPrefix(digits, "0x") {
		return s
	}
	if neg {
		return "-" + strconv.FormatUint(u, 10)
	}
	return strconv.FormatUint(u, 10)
}

// canonJSON converts a decoded JSON value.
func canonJSON(v any) any {
	switch v := v.(type) {
	case json.Number:
		return canonScalar(string(v))
	case bool:
		return strconv.FormatBool(v)
	case string:
		return canonScalar(v)
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			m[k] = canonJSON(x)
		}
		return m
	case []any:
		s := []any{}
		for _, x := range v {
			s = append(s, canonJSON(x))
		}
		return s
	}
	return nil
}

// canonArgs returns a JSON line's arguments as text shows them; exit-only
// calls have none.
func canonArgs(o map[string]any) map[string]any {
	m, _ := asText(canonJSON(o["args"])).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// asText reduces a canonical value to what text shows of it: a struct with
// a short form ("$short") is that form alone.
func asText(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if short, ok := v["$short"].(string); ok {
			return short
		}
		m := map[string]any{}
		for k, x := range v {
			m[k] = asText(x)
		}
		return m
	case []any:
		s := []any{}
		for _, x := range v {
			s = append(s, asText(x))
		}
		return s
	}
	return v
}

// canonRet returns a JSON line's return value as text shows it: -ENAME
// when it has an errno name.
func canonRet(o map[string]any) any {
	if e, ok := o["errno"].(string); ok {
		return "-" + e
	}
	if r, ok := o["ret"]; ok {
		return asText(canonJSON(r))
	}
	return "<none>"
}

// textParser reads the C-like literals of a text line.
type textParser struct {
	s   string
	pos int
}

func (p *textParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at column %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

func (p *textParser) eat(s string) bool {
	if strings.HasPrefix(p.s[p.pos:], s) {
		p.pos += len(s)
		return true
	}
	return false
}

// call parses "name=value, ...) = ret" after the opening parenthesis and
// the notes after it, up to the duration. ret is "<none>" when not shown.
func (p *textParser) call(o map[string]any) (map[string]any, any, error) {
	args := map[string]any{}
	p.eat("?") // exit only
	for !p.eat(")") {
		if len(args) > 0 && !p.eat(", ") {
			return nil, nil, p.errorf("want ', ' or ')'")
		}
		eq := strings.IndexByte(p.s[p.pos:], '=')
		if eq < 0 {
			return nil, nil, p.errorf("argument without '='")
		}
		name := p.s[p.pos : p.pos+eq]
		p.pos += eq + 1
		v, err := p.value()
		if err != nil {
			return nil, nil, err
		}
		args[name] = v
	}
	var ret any = "<none>"
	switch {
	case p.eat(" = ? (no exit)"):
	case p.eat(" = "):
		v, err := p.value()
		if err != nil {
			return nil, nil, err
		}
		ret = v
	}
	p.eat(" [missed events]")
	return args, ret, nil
}

// value parses one value.
func (p *textParser) value() (any, error) {
	if p.pos >= len(p.s) {
		return nil, p.errorf("value missing")
	}
	switch p.s[p.pos] {
	case '"':
		q, err := strconv.QuotedPrefix(p.s[p.pos:])
		if err != nil {
			return nil, p.errorf("bad string: %v", err)
		}
		p.pos += len(q)
		p.eat("...")
		s, _ := strconv.Unquote(q)
		return canonScalar(s), nil
	case '<':
		end := strings.IndexByte(p.s[p.pos:], '>')
		if end < 0 {
			return nil, p.errorf("unclosed bytes")
		}
		hex := strings.TrimSuffix(p.s[p.pos+1:p.pos+end], "...")
		p.pos += end + 1
		return hex, nil
	case '{':
		return p.fields('}')
	case '[':
		return p.fields(']')
	}
	end := strings.IndexAny(p.s[p.pos:], ",)}] ")
	if end < 0 {
		end = len(p.s) - p.pos
	}
	tok := p.s[p.pos : p.pos+end]
	p.pos += end
	if tok == "?" || tok == "NULL" {
		return nil, nil
	}
	return canonScalar(tok), nil
}

// fields parses {name=value, ...} or [value, ...] with their marks.
func (p *textParser) fields(close byte) (any, error) {
	p.pos++
	if p.eat("..." + string(close)) {
		return map[string]any{"$elided": "true"}, nil
	}
	m := map[string]any{}
	var elems []any
	for n := 0; !p.eat(string(close)); n++ {
		if n > 0 && !p.eat(", ") {
			return nil, p.errorf("want ', ' or '%c'", close)
		}
		switch {
		case p.eat("...+"):
			end := strings.IndexAny(p.s[p.pos:], ",}]")
			if end < 0 {
				return nil, p.errorf("unterminated count")
			}
			more := p.s[p.pos : p.pos+end]
			p.pos += end
			if close == ']' {
				elems = append(elems, map[string]any{"$more": more})
			} else {
				m["$more"] = more
			}
		case close == '}' && p.eat("<truncated>"):
			m["$truncated"] = "true"
		case close == '}':
			eq := strings.IndexByte(p.s[p.pos:], '=')
			if eq < 0 {
				return nil, p.errorf("member without '='")
			}
			name := p.s[p.pos : p.pos+eq]
			p.pos += eq + 1
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			m[name] = v
		default:
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			elems = append(elems, v)
		}
	}
	if close == ']' {
		if elems == nil {
			elems = []any{}
		}
		return elems, nil
	}
	return m, nil
}
