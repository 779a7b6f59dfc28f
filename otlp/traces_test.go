// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"context"
	"encoding/hex"
	"errors"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/trawl-dev/trawl/call"
)

// wall is the made-up offset of the tests from the kernel clock to Unix
// time.
const wall = int64(1_800_000_000_000_000_000)

// tree is one task's calls as the pipeline hands them over, in the order
// they ended:
//
//	tid 10: open (ts 1000, 500 ns)      tid 20: read (ts 1100, 50 ns)
//	          lookup (ts 1100, 100 ns)
//	            hash (ts 1150, 10 ns)
//	          alloc (ts 1300, 20 ns)
func tree() []call.Call {
	task := func(c call.Call) call.Call {
		if c.TID == 0 {
			c.PID, c.TID, c.Comm = 10, 10, "cat"
		}
		return c
	}
	return []call.Call{
		task(call.Call{TS: 1150, Duration: 10, Func: "hash", Depth: 2, Args: []call.Value{{Name: "s", Kind: call.KindString, Str: "etc\xff"}}, Ret: call.Value{Kind: call.KindUint, Bits: math.MaxUint64}}),
		task(call.Call{TS: 1100, Duration: 100, Func: "lookup", Depth: 1, Ret: call.Value{Kind: call.KindErrno, Bits: uint64(0xffffffff_fffffffe), Str: "ENOENT"}}),
		{TS: 1100, Duration: 50, PID: 20, TID: 21, Comm: "dd", Func: "read", Module: "ext4", CPU: 3, Args: []call.Value{
			{Name: "buf", Kind: call.KindPointer, Bits: 0xffff0000, Str: "buf_sym", Off: 16},
			{Name: "null", Kind: call.KindPointer},
			{Name: "", Kind: call.KindBool, Bits: 1},
			{Name: "mode", Kind: call.KindEnum, Str: "O_RDONLY|O_CLOEXEC", Bits: 0x80000},
			{Name: "raw", Kind: call.KindBytes, Str: "\x01\xab"},
			{Name: "gone", Kind: call.KindUnknown},
			{Name: "sk", Kind: call.KindStruct, Fields: []call.Value{{Name: "port", Kind: call.KindInt, Bits: 80}, {Name: "name", Kind: call.KindString, Str: "a\"b"}}, More: 2},
		}, Ret: call.Value{Kind: call.KindInt, Bits: 5}},
		task(call.Call{TS: 1300, Duration: 20, Func: "alloc", Depth: 1, Flags: call.Missed, Stack: []string{"alloc+0x4", "open+0x10"}}),
		task(call.Call{TS: 1000, Duration: 500, Func: "open", Args: []call.Value{{Name: "flags", Kind: call.KindInt, Bits: 0x8000}}, Ret: call.Value{Kind: call.KindInt, Bits: 3}}),
	}
}

// keepSpans is an in-memory exporter whose spans outlive its shutdown.
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }

// TestSpans checks the span of each call: name, times, parent links and
// attributes, every value sent (ValuesAll).
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := NewTracesTo(keepSpans{exp}, Options{WallOffset: wall, Kernel: "7.3.0-test", Values: ValuesAll})
	if err != nil {
		t.Fatal(err)
	}
	calls := tree()
	for i := range calls {
		if err := tr.Call(&calls[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if st := tr.Stats(); st.Spans != 5 || st.Exported != 5 || st.Dropped != 0 || st.Failed != 0 || st.Err != nil {
		t.Errorf("stats %+v, want 5 spans exported", st)
	}
	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	if len(spans) != 5 {
		t.Fatalf("got %d spans, want 5", len(spans))
	}
	parent := map[string]string{"open": "", "lookup": "open", "hash": "lookup", "alloc": "open", "read": ""}
	for name, want := range parent {
		s := spans[name]
		if want == "" {
			if s.Parent.IsValid() {
				t.Errorf("%s: has a parent, want none", name)
			}
			continue
		}
		p := spans[want]
		if s.Parent.SpanID() != p.SpanContext.SpanID() || s.SpanContext.TraceID() != p.SpanContext.TraceID() {
			t.Errorf("%s: parent %s in trace %s, want %s (%s) in trace %s", name, s.Parent.SpanID(), s.SpanContext.TraceID(), want, p.SpanContext.SpanID(), p.SpanContext.TraceID())
		}
	}
	if spans["read"].SpanContext.TraceID() == spans["open"].SpanContext.TraceID() {
		t.Error("calls of two tasks share a trace")
	}
	for _, c := range calls {
		s := spans[c.Func]
		if want := time.Unix(0, int64(c.TS)+wall); !s.StartTime.Equal(want) {
			t.Errorf("%s: start %v, want %v", c.Func, s.StartTime, want)
		}
		if got := s.EndTime.Sub(s.StartTime); got != time.Duration(c.Duration) {
			t.Errorf("%s: lasts %v, want %v", c.Func, got, time.Duration(c.Duration))
		}
	}
	want := map[string][]attribute.KeyValue{
		"open": {attribute.Int64("thread.id", 10), attribute.Int64("process.pid", 10), attribute.String("process.command", "cat"),
			attribute.Int64("trawl.arg.flags", 0x8000), attribute.Int64("trawl.ret", 3)},
		"hash":   {attribute.String("trawl.arg.s", "etc\uFFFD"), attribute.String("trawl.ret", "18446744073709551615")},
		"lookup": {attribute.Int64("trawl.ret", -2), attribute.String("trawl.errno", "ENOENT")},
		"alloc":  {attribute.StringSlice("trawl.flags", []string{"missed"}), attribute.StringSlice("trawl.stack", []string{"alloc+0x4", "open+0x10"})},
		"read": {attribute.Int64("thread.id", 21), attribute.Int64("process.pid", 20), attribute.String("trawl.module", "ext4"), attribute.Int64("trawl.cpu", 3),
			attribute.String("trawl.arg.buf", "buf_sym+0x10"), attribute.String("trawl.arg.null", "NULL"), attribute.Bool("trawl.arg.arg2", true),
			attribute.String("trawl.arg.mode", "O_RDONLY|O_CLOEXEC"), attribute.String("trawl.arg.raw", "01ab"), attribute.String("trawl.arg.gone", "?"),
			attribute.String("trawl.arg.sk", `{"port":80,"name":"a\"b","$more":2}`)},
	}
	for name, attrs := range want {
		got := attribute.NewSet(spans[name].Attributes...)
		for _, kv := range attrs {
			if v, ok := got.Value(kv.Key); !ok || v != kv.Value {
				t.Errorf("%s: %s = %v, want %v", name, kv.Key, v.Emit(), kv.Value.Emit())
			}
		}
	}
	if set := attribute.NewSet(spans["alloc"].Attributes...); set.HasValue("trawl.ret") {
		t.Error("a void call has trawl.ret")
	}
	if s := spans["lookup"].Status; s.Code != codes.Error || s.Description != "ENOENT" {
		t.Errorf("lookup: status %+v, want Error ENOENT", s)
	}
	res := attribute.NewSet(spans["open"].Resource.Attributes()...)
	for _, kv := range []attribute.KeyValue{attribute.String("service.name", "trawl"), attribute.String("os.version", "7.3.0-test")} {
		if v, _ := res.Value(kv.Key); v != kv.Value {
			t.Errorf("resource %s = %v, want %v", kv.Key, v.Emit(), kv.Value.Emit())
		}
	}
	for _, key := range []attribute.Key{"host.name", "service.version"} {
		if v, _ := res.Value(key); v.AsString() == "" {
			t.Errorf("resource has no %s", key)
		}
	}
}

// TestExportOverTheWire exports the spans to an OTLP receiver over each
// protocol, as a collector gets them.
func TestExportOverTheWire(t *testing.T) {
	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			r := &receiver{}
			url := r.startHTTP
			if proto == "grpc" {
				url = r.startGRPC
			}
			tr, err := NewTraces(context.Background(), Options{URL: url(t), WallOffset: wall, Values: ValuesAll})
			if err != nil {
				t.Fatal(err)
			}
			calls := tree()
			for i := range calls {
				tr.Call(&calls[i])
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			if st := tr.Stats(); st.Exported != 5 {
				t.Fatalf("stats %+v, want 5 exported", st)
			}
			reqs, _ := r.received()
			names := map[string]bool{}
			var service string
			for _, req := range reqs {
				for _, rs := range req.ResourceSpans {
					for _, kv := range rs.Resource.Attributes {
						if kv.Key == "service.name" {
							service = kv.Value.GetStringValue()
						}
					}
					for _, ss := range rs.ScopeSpans {
						for _, s := range ss.Spans {
							names[s.Name] = true
							if s.Name == "open" && s.StartTimeUnixNano != uint64(wall+1000) {
								t.Errorf("open starts at %d, want %d", s.StartTimeUnixNano, wall+1000)
							}
							if s.Name == "read" {
								checkAttr(t, s.Attributes, "trawl.arg.sk", `{"port":80,"name":"a\"b","$more":2}`)
							}
						}
					}
				}
			}
			if len(names) != 5 || service != "trawl" {
				t.Errorf("received spans %v of service %q, want 5 of trawl", names, service)
			}
		})
	}
}

func checkAttr(t *testing.T, attrs []*commonpb.KeyValue, key, want string) {
	t.Helper()
	for _, kv := range attrs {
		if kv.Key == key {
			if got := kv.Value.GetStringValue(); got != want {
				t.Errorf("%s = %q, want %q", key, got, want)
			}
			return
		}
	}
	t.Errorf("no attribute %s", key)
}

// TestCollectorDown checks that a collector that is not there, or does not
// answer, costs counted spans, never a wait past the shutdown's deadline.
func TestCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	silent := &receiver{hold: make(chan struct{})}
	for _, tc := range []struct{ name, url string }{
		{"refused-grpc", "grpc://" + closed},
		{"refused-http", "http://" + closed},
		{"silent-grpc", silent.startGRPC(t)},
		{"silent-http", silent.startHTTP(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := NewTraces(context.Background(), Options{URL: tc.url, WallOffset: wall, QueueSize: 64, BatchSize: 16, Interval: 10 * time.Millisecond, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			const n = 10000
			start := time.Now()
			c := call.Call{TS: 1, Duration: 1, PID: 1, TID: 1, Comm: "x", Func: "f"}
			for range n {
				tr.Call(&c)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%d calls took %v: the exporter held them up", n, d)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start = time.Now()
			tr.Shutdown(ctx)
			if d := time.Since(start); d > 700*time.Millisecond {
				t.Errorf("shutdown took %v, want at most the 300ms deadline and a little", d)
			}
			st := tr.Stats()
			if st.Spans != n || st.Exported+st.Dropped+st.Failed != n || st.Exported != 0 {
				t.Errorf("stats %+v: want %d spans, none exported, each dropped or failed", st, n)
			}
			if st.Dropped == 0 || st.Failed == 0 {
				t.Errorf("stats %+v: want drops (queue full) and failures", st)
			}
			if strings.HasPrefix(tc.name, "refused") && st.Err == nil {
				t.Error("no export error")
			}
		})
	}
}

// TestBadURL checks the URLs refused, with their reason.
func TestBadURL(t *testing.T) {
	for _, u := range []string{"", "localhost:4317", "ftp://h:1", "grpc://host", "grpc://h:1/x", "http://u@h:1", "http://h:1/?q"} {
		if err := CheckURL(u); !errors.Is(err, ErrBadURL) {
			t.Errorf("CheckURL(%q) = %v, want ErrBadURL", u, err)
		}
	}
	for _, u := range []string{"grpc://127.0.0.1:4317", "grpcs://collector:4317", "http://[::1]:4318", "https://c:443/otlp/"} {
		if err := CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
}

// secret is the bytes of a traced write() the tests look for in spans.
const secret = "trawl-secret-buffer"

// longPath is a string of 100 bytes.
var longPath = "/tmp/" + strings.Repeat("a", 95)

// valueCalls are a write() of secret, with a value of every kind, and an
// open() that fails.
func valueCalls() []call.Call {
	return []call.Call{
		{TS: 1000, Duration: 10, PID: 7, TID: 7, Comm: "app", Func: "vfs_write", Args: []call.Value{
			{Name: "file", Kind: call.KindPointer, Bits: 0xffff888000001000},
			{Name: "ops", Kind: call.KindPointer, Bits: 0xffffffff82000000, Str: "ext4_file_operations"},
			{Name: "null", Kind: call.KindPointer},
			{Name: "buf", Kind: call.KindString, Flags: call.Buffer, Str: secret},
			{Name: "raw", Kind: call.KindBytes, Flags: call.Buffer, Str: "\x00\x01" + secret},
			{Name: "mem", Kind: call.KindBytes, Str: "\xfe\xff"},
			{Name: "count", Kind: call.KindUint, Bits: uint64(len(secret))},
			{Name: "delta", Kind: call.KindInt, Bits: math.MaxUint64},
			{Name: "ratio", Kind: call.KindFloat, Bits: math.Float64bits(0.5)},
			{Name: "mode", Kind: call.KindEnum, Str: "O_RDONLY", Bits: 0},
			{Name: "path", Kind: call.KindString, Str: longPath},
			{Name: "sync", Kind: call.KindBool, Bits: 1},
			{Name: "gone", Kind: call.KindUnknown},
			{Name: "pos", Kind: call.KindStruct, Fields: []call.Value{{Name: "v", Kind: call.KindInt, Bits: 10}}},
			{Name: "iov", Kind: call.KindArray, Fields: []call.Value{{Kind: call.KindString, Str: secret}}},
		}, Show: []call.Value{
			{Name: "buf(buf, count)", Kind: call.KindString, Flags: call.Buffer, Str: secret},
			{Name: "str(name)", Kind: call.KindString, Str: "eth0"},
		}, Ret: call.Value{Kind: call.KindInt, Bits: uint64(len(secret))}},
		{TS: 2000, Duration: 10, PID: 7, TID: 7, Comm: "app", Func: "do_sys_openat2",
			Args: []call.Value{{Name: "filename", Kind: call.KindString, Str: "/etc/missing"}},
			Ret:  call.Value{Kind: call.KindErrno, Bits: uint64(0xffffffff_fffffffe), Str: "ENOENT"}},
	}
}

// export makes spans of calls with opts and returns them by name, with
// the stats.
func export(t *testing.T, opts Options, calls []call.Call) (map[string]tracetest.SpanStub, TraceStats) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	opts.WallOffset = wall
	tr, err := NewTracesTo(keepSpans{exp}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		tr.Call(&calls[i])
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	if len(spans) != len(calls) {
		t.Fatalf("%d spans, want %d", len(spans), len(calls))
	}
	return spans, tr.Stats()
}

// values returns the attributes of the values of a span: trawl.arg.*,
// trawl.show.* and trawl.ret.
func values(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		if k := string(kv.Key); strings.HasPrefix(k, "trawl.arg.") || strings.HasPrefix(k, "trawl.show.") || k == "trawl.ret" {
			m[k] = kv.Value
		}
	}
	return m
}

// TestValueLevels exports a write() of a buffer at each level of
// Options.Values and checks that its span carries exactly the values the
// level sends, and no byte of the buffer below ValuesAll.
func TestValueLevels(t *testing.T) {
	numbers := map[string]attribute.Value{
		"trawl.arg.ops":        attribute.StringValue("ext4_file_operations"),
		"trawl.arg.null":       attribute.StringValue("NULL"),
		"trawl.arg.count":      attribute.Int64Value(int64(len(secret))),
		"trawl.arg.delta":      attribute.Int64Value(-1),
		"trawl.arg.ratio":      attribute.Float64Value(0.5),
		"trawl.arg.mode":       attribute.StringValue("O_RDONLY"),
		"trawl.arg.sync":       attribute.BoolValue(true),
		"trawl.arg.gone":       attribute.StringValue("?"),
		"trawl.show.str(name)": attribute.StringValue("eth0"),
		"trawl.ret":            attribute.Int64Value(int64(len(secret))),
	}
	names := maps.Clone(numbers)
	names["trawl.arg.path"] = attribute.StringValue(longPath[:NamesStringLimit-3] + "...")
	all := maps.Clone(numbers)
	maps.Copy(all, map[string]attribute.Value{
		"trawl.arg.path":             attribute.StringValue(longPath),
		"trawl.arg.file":             attribute.StringValue("0xffff888000001000"),
		"trawl.arg.buf":              attribute.StringValue(secret),
		"trawl.arg.raw":              attribute.StringValue("0001" + hex.EncodeToString([]byte(secret))),
		"trawl.arg.mem":              attribute.StringValue("feff"),
		"trawl.arg.pos":              attribute.StringValue(`{"v":10}`),
		"trawl.arg.iov":              attribute.StringValue(`["` + secret + `"]`),
		"trawl.show.buf(buf, count)": attribute.StringValue(secret),
	})
	for _, tc := range []struct {
		level Values
		want  map[string]attribute.Value
		cut   uint64
	}{
		{ValuesNone, map[string]attribute.Value{}, 0},
		{"", names, 1},
		{ValuesNames, names, 1},
		{ValuesAll, all, 0},
	} {
		t.Run(string(tc.level), func(t *testing.T) {
			spans, st := export(t, Options{Values: tc.level}, valueCalls())
			write := spans["vfs_write"]
			got := values(write)
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v, want %v", k, g.Emit(), v.Emit())
				}
			}
			for k, v := range got {
				if _, ok := tc.want[k]; !ok {
					t.Errorf("%s = %v sent, want none", k, v.Emit())
				}
			}
			leaked := false
			for _, kv := range write.Attributes {
				text := kv.Value.Emit()
				leaked = leaked || strings.Contains(text, secret) || strings.Contains(text, hex.EncodeToString([]byte(secret)))
			}
			if leaked != (tc.level == ValuesAll) {
				t.Errorf("the buffer's bytes sent: %v; want them only with ValuesAll", leaked)
			}
			open := attribute.NewSet(spans["do_sys_openat2"].Attributes...)
			if v, _ := open.Value("trawl.errno"); v.AsString() != "ENOENT" || spans["do_sys_openat2"].Status.Code != codes.Error {
				t.Errorf("do_sys_openat2: trawl.errno %q, status %v; want ENOENT and an error at every level", v.AsString(), spans["do_sys_openat2"].Status)
			}
			for _, k := range []attribute.Key{"thread.id", "process.pid", "process.command", "trawl.cpu"} {
				if !open.HasValue(k) {
					t.Errorf("do_sys_openat2: no %s", k)
				}
			}
			if st.Cut != tc.cut {
				t.Errorf("%d values cut, want %d", st.Cut, tc.cut)
			}
		})
	}
}

// TestAttributeLimit checks that every string attribute, the frames of
// the stack included, is cut to Options.AttributeLimit bytes, at a
// character boundary, ending in "...", and counted.
func TestAttributeLimit(t *testing.T) {
	const limit = MinAttributeLimit
	calls := valueCalls()
	calls[0].Args = append(calls[0].Args, call.Value{Name: "utf8", Kind: call.KindString, Str: strings.Repeat("é", 9)})
	calls[0].Stack = []string{"vfs_write+0x4", "a_function_with_a_long_name+0x10 [module]"}
	stack := slices.Clone(calls[0].Stack)
	spans, st := export(t, Options{Values: ValuesAll, AttributeLimit: limit}, calls)
	got := attribute.NewSet(spans["vfs_write"].Attributes...)
	for k, want := range map[attribute.Key]string{
		"trawl.arg.path":       "/tmp/aaaaaaaa...",
		"trawl.arg.buf":        "trawl-secret-...",
		"trawl.arg.utf8":       "éééééé...", // 15 bytes: no half of an é
		"trawl.arg.ops":        "ext4_file_ope...",
		"trawl.arg.mode":       "O_RDONLY",
		"trawl.show.str(name)": "eth0",
	} {
		if v, _ := got.Value(k); v.AsString() != want {
			t.Errorf("%s = %q, want %q", k, v.AsString(), want)
		}
	}
	if v, _ := got.Value("trawl.stack"); !slices.Equal(v.AsStringSlice(), []string{"vfs_write+0x4", "a_function_wi..."}) {
		t.Errorf("trawl.stack = %q, want the long frame cut", v.AsStringSlice())
	}
	if !slices.Equal(calls[0].Stack, stack) {
		t.Errorf("the call's stack changed: %q", calls[0].Stack)
	}
	cut := uint64(0)
	for _, s := range spans {
		for _, kv := range s.Attributes {
			list := []string{kv.Value.AsString()}
			if kv.Value.Type() == attribute.STRINGSLICE {
				list = kv.Value.AsStringSlice()
			}
			for _, v := range list {
				if len(v) > limit || !utf8.ValidString(v) {
					t.Errorf("%s: %q: %d bytes, want at most %d of UTF-8", kv.Key, v, len(v), limit)
				}
				if strings.HasSuffix(v, "...") {
					cut++
				}
			}
		}
	}
	// file, ops, buf, raw, path, iov, utf8, buf(buf, count) and a frame.
	if st.Cut != 9 || cut != 9 {
		t.Errorf("stats count %d values cut, the spans have %d; want 9", st.Cut, cut)
	}
	// ValuesNames cuts a string to the limit once, when it is lower.
	_, st = export(t, Options{AttributeLimit: 32}, []call.Call{{Func: "f", Args: []call.Value{{Name: "path", Kind: call.KindString, Str: longPath}}}})
	if st.Cut != 1 {
		t.Errorf("names, limit 32: %d values cut, want 1", st.Cut)
	}
}

// TestBadOptions checks the levels and limits NewTracesTo refuses.
func TestBadOptions(t *testing.T) {
	for _, opts := range []Options{{Values: "some"}, {Values: "ALL"}, {AttributeLimit: MinAttributeLimit - 1}, {AttributeLimit: -1}} {
		if _, err := NewTracesTo(keepSpans{tracetest.NewInMemoryExporter()}, opts); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: %v, want ErrBadOptions", opts, err)
		}
	}
	if _, err := NewTraces(context.Background(), Options{URL: "grpc://127.0.0.1:4317", Values: "some"}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("NewTraces with Values some: %v, want ErrBadOptions", err)
	}
}

// TestInsecureRemote checks which endpoints carry the trace in the clear
// to another machine.
func TestInsecureRemote(t *testing.T) {
	ctx := context.Background()
	for u, want := range map[string]bool{
		"http://10.0.0.1:4318":           true,
		"grpc://10.0.0.1:4317":           true,
		"http://[2001:db8::1]:4318/otlp": true,
		"http://127.0.0.1:4318":          false,
		"http://127.3.2.1:4318":          false,
		"grpc://[::1]:4317":              false,
		"http://[::ffff:127.0.0.1]:4318": false,
		"http://localhost:4318":          false,
		"grpc://LOCALHOST.:4317":         false,
		"http://:4318":                   false,
		"https://10.0.0.1:4318":          false,
		"grpcs://10.0.0.1:4317":          false,
		"ftp://10.0.0.1:21":              false, // refused by CheckURL
	} {
		if got := InsecureRemote(ctx, u); got != want {
			t.Errorf("InsecureRemote(%q) = %v, want %v", u, got, want)
		}
	}
	lookup := func(_ context.Context, network, host string) ([]netip.Addr, error) {
		addrs := map[string][]string{
			"local.test":  {"127.0.0.2", "::1"},
			"mapped.test": {"::ffff:127.0.0.1"},
			"mixed.test":  {"127.0.0.1", "10.0.0.1"},
			"remote.test": {"192.0.2.1"},
			"empty.test":  {},
		}[host]
		if addrs == nil {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
	for host, want := range map[string]bool{
		"local.test": true, "mapped.test": true,
		"mixed.test": false, "remote.test": false, "empty.test": false, "unknown.test": false,
	} {
		if got := loopback(ctx, host, lookup); got != want {
			t.Errorf("loopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestSpanEvents makes a tracepoint's event inside a call an event of the
// call's span, one outside any call a span without duration, and counts
// the event of a call whose end never came as dropped.
func TestSpanEvents(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := NewTracesTo(keepSpans{exp}, Options{WallOffset: wall, Values: ValuesAll})
	if err != nil {
		t.Fatal(err)
	}
	event := func(ts uint64, depth, tid int) call.Call {
		return call.Call{TS: ts, Depth: depth, PID: 10, TID: uint32(tid), Comm: "cat", Func: "tp:skb:kfree_skb", Flags: call.Event,
			Args: []call.Value{{Name: "reason", Kind: call.KindEnum, Str: "SKB_DROP_REASON_NO_SOCKET", Bits: 3}}}
	}
	calls := append(tree(),
		event(2000, 0, 10),
		event(3100, 2, 10), // in a call at depth 1 that never ends
		call.Call{TS: 3000, Duration: 500, PID: 10, TID: 10, Comm: "cat", Func: "send"},
	)
	// An event inside hash (ts 1150, depth 2), in order of completion.
	calls = slices.Insert(calls, 0, event(1155, 3, 10))
	for i := range calls {
		if err := tr.Call(&calls[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if st := tr.Stats(); st.Spans != 9 || st.Exported != 8 || st.Dropped != 1 || st.Failed != 0 {
		t.Errorf("stats %+v, want 9 spans, 8 exported (2 as span events) and 1 dropped", st)
	}
	spans := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = append(spans[s.Name], s)
	}
	hash := spans["hash"][0]
	if len(hash.Events) != 1 {
		t.Fatalf("hash carries %d events, want 1", len(hash.Events))
	}
	e := hash.Events[0]
	if e.Name != "tp:skb:kfree_skb" || !e.Time.Equal(time.Unix(0, 1155+wall)) {
		t.Errorf("span event %s at %v, want tp:skb:kfree_skb at %v", e.Name, e.Time, time.Unix(0, 1155+wall))
	}
	got := attribute.NewSet(e.Attributes...)
	for _, kv := range []attribute.KeyValue{attribute.String("trawl.arg.reason", "SKB_DROP_REASON_NO_SOCKET"), attribute.String("trawl.kind", "tracepoint"), attribute.Int64("thread.id", 10)} {
		if v, ok := got.Value(kv.Key); !ok || v != kv.Value {
			t.Errorf("span event: %s = %v, want %v", kv.Key, v.Emit(), kv.Value.Emit())
		}
	}
	for _, name := range []string{"open", "lookup", "send"} {
		if n := len(spans[name][0].Events); n != 0 {
			t.Errorf("%s carries %d events, want none", name, n)
		}
	}
	alone := spans["tp:skb:kfree_skb"]
	if len(alone) != 1 || alone[0].Parent.IsValid() || !alone[0].EndTime.Equal(alone[0].StartTime) || !alone[0].StartTime.Equal(time.Unix(0, 2000+wall)) {
		t.Fatalf("the event outside any call: %+v, want one span of its own without duration at 2000", alone)
	}
	set := attribute.NewSet(alone[0].Attributes...)
	if v, _ := set.Value("trawl.kind"); v.AsString() != "tracepoint" {
		t.Errorf("the event's span: trawl.kind %q, want tracepoint", v.AsString())
	}
}

// TestUserStackAttribute: a call's user stack is the attribute
// trawl.ustack, innermost first.
func TestUserStackAttribute(t *testing.T) {
	calls := valueCalls()
	calls[0].UStack = []string{"write+0x14 [libc.so.6]", "main.main+0x2c [app]"}
	spans, _ := export(t, Options{}, calls)
	got := attribute.NewSet(spans["vfs_write"].Attributes...)
	if v, _ := got.Value("trawl.ustack"); !slices.Equal(v.AsStringSlice(), calls[0].UStack) {
		t.Errorf("trawl.ustack = %q, want %q", v.AsStringSlice(), calls[0].UStack)
	}
}
