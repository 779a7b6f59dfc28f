// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

// scope is the instrumentation scope of the spans and metrics.
const scope = "github.com/trawl-dev/trawl/otlp"

// maxTasks bounds the tasks whose open calls Traces remembers; past it
// they are forgotten, and the spans of calls that were open then start
// traces of their own.
const maxTasks = 1 << 16

// TraceStats count what became of the spans.
type TraceStats struct {
	// Spans counts the calls and events given to Call, Exported the
	// spans the collector took and the span events they carried, Dropped
	// the calls the full queue had no room for and the events of calls
	// that never ended (or past maxSpanEvents in one), Failed the spans
	// and span events whose export failed and the calls still queued
	// when a shutdown ran out of time (or given after it):
	// Spans = Exported + Dropped + Failed once shut down.
	Spans, Exported, Dropped, Failed uint64
	// Cut counts the attribute values cut short, each ending in "...":
	// strings past NamesStringLimit (ValuesNames) and any string past
	// Options.AttributeLimit.
	Cut uint64
	// Err is the last export error, nil if none failed; one cut short by
	// Shutdown only if none failed before.
	Err error
}

// Traces exports each call as a span. Call it from one goroutine, as the
// pipeline does with every render.Renderer: it only queues a copy of the
// call, and a goroutine of its own makes the spans and sends them.
type Traces struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	ids      *presetIDs
	exp      sdktrace.SpanExporter
	opts     Options
	in       chan call.Call
	closed   bool // by Shutdown, on Call's goroutine
	// abort, cancelled when a shutdown runs out of time, ends the export
	// in flight and makes the sender count the rest as failed.
	abort  context.Context
	cancel context.CancelFunc
	done   chan struct{}

	spans, dropped, exported, failed, cuts atomic.Uint64
	mu                                     sync.Mutex
	err                                    error

	// The sender's: per thread, the ids of the spans of the calls in
	// progress, by depth (a call's span id is chosen when its first child
	// ends, before the call itself does); the spans ended and not sent.
	tasks map[uint32][]openCall
	batch []sdktrace.ReadOnlySpan
	attrs []attribute.KeyValue
	json  []byte
}

type openCall struct {
	trace trace.TraceID
	span  trace.SpanID
	// events are the tracepoints' events that happened in the call, for
	// its span once it ends.
	events []call.Call
}

// maxSpanEvents bounds the events one span carries; the others are
// dropped (counted).
const maxSpanEvents = 1024

// NewTraces returns a Traces exporting to the collector at opts.URL.
func NewTraces(ctx context.Context, opts Options) (*Traces, error) {
	e, err := parseURL(opts.URL)
	if err != nil {
		return nil, err
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	var exp sdktrace.SpanExporter
	if e.grpc {
		o := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(e.host), otlptracegrpc.WithTimeout(opts.Timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if !e.secure {
			o = append(o, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, o...)
	} else {
		o := []otlptracehttp.Option{otlptracehttp.WithEndpoint(e.host), otlptracehttp.WithURLPath(e.prefix + "/v1/traces"),
			otlptracehttp.WithTimeout(opts.Timeout), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}
		if !e.secure {
			o = append(o, otlptracehttp.WithInsecure())
		}
		exp, err = otlptracehttp.New(ctx, o...)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter for %s: %w", opts.URL, err)
	}
	return NewTracesTo(exp, opts)
}

// NewTracesTo returns a Traces exporting with exp (opts.URL unused): an
// exporter of the OpenTelemetry SDK, such as an in-memory one in tests.
func NewTracesTo(exp sdktrace.SpanExporter, opts Options) (*Traces, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if opts.WallOffset == 0 {
		off, err := render.WallOffset()
		if err != nil {
			return nil, err
		}
		opts.WallOffset = off
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	t := &Traces{
		ids:   &presetIDs{},
		exp:   exp,
		opts:  opts,
		in:    make(chan call.Call, opts.QueueSize),
		done:  make(chan struct{}),
		tasks: map[uint32][]openCall{},
		batch: make([]sdktrace.ReadOnlySpan, 0, opts.BatchSize),
	}
	t.abort, t.cancel = context.WithCancel(context.Background())
	t.provider = sdktrace.NewTracerProvider(
		sdktrace.WithResource(newResource(opts.Kernel)),
		sdktrace.WithIDGenerator(t.ids),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(collect{t}),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeValueLengthLimit: -1, AttributeCountLimit: -1,
			EventCountLimit: maxSpanEvents, AttributePerEventCountLimit: -1}),
	)
	t.tracer = t.provider.Tracer(scope, trace.WithInstrumentationVersion(trawl.Version().Version))
	go t.send()
	return t, nil
}

// Call queues a copy of c, to be made a span and sent; a full queue
// drops it (counted).
func (t *Traces) Call(c *call.Call) error {
	t.spans.Add(1)
	if t.closed {
		t.failed.Add(1)
		return nil
	}
	cp := *c
	cp.Args = slices.Clone(c.Args)
	cp.Show = slices.Clone(c.Show)
	select {
	case t.in <- cp:
	default:
		t.dropped.Add(1)
	}
	return nil
}

// send makes the queued calls spans and sends them in batches, a batch
// when it is full or Interval after its first span, until the queue is
// closed and empty.
func (t *Traces) send() {
	defer close(t.done)
	timer := time.NewTimer(t.opts.Interval)
	timer.Stop()
	for {
		select {
		case c, ok := <-t.in:
			if !ok {
				t.export()
				for _, open := range t.tasks {
					t.dropEvents(open)
				}
				return
			}
			if t.abort.Err() != nil {
				t.failed.Add(1)
				continue
			}
			if len(t.batch) == 0 {
				timer.Reset(t.opts.Interval)
			}
			t.span(&c)
			if len(t.batch) >= t.opts.BatchSize {
				t.export()
			}
		case <-timer.C:
			t.export()
		}
	}
}

// export sends the batch, counting its spans as exported or failed.
func (t *Traces) export() {
	batch := t.batch
	t.batch = make([]sdktrace.ReadOnlySpan, 0, t.opts.BatchSize)
	if len(batch) == 0 {
		return
	}
	if t.abort.Err() != nil {
		for _, s := range batch {
			t.failed.Add(1 + uint64(len(s.Events())))
		}
		return
	}
	n := uint64(0)
	for _, s := range batch {
		n += 1 + uint64(len(s.Events()))
	}
	ctx, cancel := context.WithTimeout(t.abort, t.opts.Timeout)
	err := t.exp.ExportSpans(ctx, batch)
	cancel()
	if err != nil {
		t.failed.Add(n)
		t.mu.Lock()
		// An export cut short by the shutdown says less than the
		// failure before it.
		if t.err == nil || t.abort.Err() == nil {
			t.err = err
		}
		t.mu.Unlock()
		return
	}
	t.exported.Add(n)
}

// span makes c a span, ended into the batch, carrying the events that
// happened in it. A tracepoint's event inside a call is kept for that
// call's span instead; one outside any call is a span without duration.
func (t *Traces) span(c *call.Call) {
	if c.Flags&call.Event != 0 && c.Depth > 0 {
		t.keepEvent(c)
		return
	}
	traceID, parent, self, events := t.link(c)
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: traceID, SpanID: parent, TraceFlags: trace.FlagsSampled,
		}))
	}
	t.ids.trace, t.ids.span = traceID, self
	start := time.Unix(0, int64(c.TS)+t.opts.WallOffset)
	_, span := t.tracer.Start(ctx, validUTF8(c.Func), trace.WithTimestamp(start), trace.WithAttributes(t.attributes(c)...))
	if c.Ret.Kind == call.KindErrno {
		span.SetStatus(codes.Error, errnoName(&c.Ret))
	}
	for i := range events {
		e := &events[i]
		span.AddEvent(validUTF8(e.Func), trace.WithTimestamp(time.Unix(0, int64(e.TS)+t.opts.WallOffset)), trace.WithAttributes(t.attributes(e)...))
	}
	span.End(trace.WithTimestamp(start.Add(time.Duration(c.Duration))))
}

// link returns the ids of c's trace, of its caller's span (invalid for an
// outermost call) and of its own span, with the events that happened in
// c, and forgets c's depth and deeper on its task: those calls have
// ended.
func (t *Traces) link(c *call.Call) (trace.TraceID, trace.SpanID, trace.SpanID, []call.Call) {
	d := max(c.Depth, 0)
	open := t.open(c.TID, d)
	var parent trace.SpanID
	if d > 0 {
		if !open[d-1].span.IsValid() {
			open[d-1].span = newSpanID()
		}
		parent = open[d-1].span
	}
	self := open[d].span
	if !self.IsValid() {
		self = newSpanID()
	}
	events := open[d].events
	open[d].events = nil
	traceID := open[0].trace
	t.forget(c.TID, open, d)
	return traceID, parent, self, events
}

// keepEvent keeps event c, of a tracepoint at depth d > 0, for the span
// of the call it happened in, its task's call in progress at depth d-1,
// and forgets depth d and deeper as link does.
func (t *Traces) keepEvent(c *call.Call) {
	d := c.Depth
	open := t.open(c.TID, d)
	if in := &open[d-1]; len(in.events) < maxSpanEvents {
		in.events = append(in.events, *c)
	} else {
		t.dropped.Add(1)
	}
	t.forget(c.TID, open, d)
}

// open returns the calls in progress on task tid, depth 0 to d at least,
// the first holding the task's trace id.
func (t *Traces) open(tid uint32, d int) []openCall {
	open, ok := t.tasks[tid]
	if !ok && len(t.tasks) >= maxTasks {
		for _, calls := range t.tasks {
			t.dropEvents(calls)
		}
		clear(t.tasks)
	}
	if len(open) <= d {
		open = append(open, make([]openCall, d+1-len(open))...)
	}
	if !open[0].trace.IsValid() {
		open[0].trace = newTraceID()
	}
	return open
}

// forget forgets the calls of open (task tid's) at depth d and deeper,
// which have ended: the events still kept for them are of calls whose
// end was not seen, dropped.
func (t *Traces) forget(tid uint32, open []openCall, d int) {
	t.dropEvents(open[d:])
	if d == 0 {
		delete(t.tasks, tid)
		return
	}
	clear(open[d:])
	t.tasks[tid] = open[:d]
}

// dropEvents counts the events kept for calls as dropped.
func (t *Traces) dropEvents(calls []openCall) {
	for _, c := range calls {
		t.dropped.Add(uint64(len(c.events)))
	}
}

// attributes returns the span attributes of c, in a slice reused by the
// next call: the values Options.Values sends, every string cut to
// Options.AttributeLimit.
func (t *Traces) attributes(c *call.Call) []attribute.KeyValue {
	a := append(t.attrs[:0],
		attribute.Int64("thread.id", int64(c.TID)),
		attribute.Int64("process.pid", int64(c.PID)),
		attribute.String("process.command", validUTF8(c.Comm)),
		attribute.Int64("trawl.cpu", int64(c.CPU)),
	)
	if c.Module != "" {
		a = append(a, attribute.String("trawl.module", c.Module))
	}
	if c.Flags&call.Event != 0 {
		a = append(a, attribute.String("trawl.kind", "tracepoint"))
	}
	if c.Flags&call.ExitOnly == 0 {
		for i := range c.Args {
			name := c.Args[i].Name
			if name == "" {
				name = "arg" + strconv.Itoa(i)
			}
			a = t.value(a, "trawl.arg."+name, &c.Args[i])
		}
	}
	for i := range c.Show {
		a = t.value(a, "trawl.show."+validUTF8(c.Show[i].Name), &c.Show[i])
	}
	if c.Ret.Kind != call.KindNone {
		a = t.value(a, "trawl.ret", &c.Ret)
		if name := errnoName(&c.Ret); name != "" {
			a = append(a, attribute.String("trawl.errno", name))
		}
	}
	if c.Chain != 0 {
		a = append(a, attribute.Int64("trawl.chain", int64(c.Chain)))
	}
	for i := range a {
		if a[i].Value.Type() == attribute.STRING {
			if s, ok := t.cut(a[i].Value.AsString(), t.opts.AttributeLimit); ok {
				a[i].Value = attribute.StringValue(s)
			}
		}
	}
	// The names of trawl.flags are shorter than MinAttributeLimit.
	if flags := flagNames(c.Flags); len(flags) > 0 {
		a = append(a, attribute.StringSlice("trawl.flags", flags))
	}
	if c.Stack != nil {
		a = append(a, attribute.StringSlice("trawl.stack", t.cutFrames(c.Stack)))
	}
	if c.UStack != nil {
		a = append(a, attribute.StringSlice("trawl.ustack", t.cutFrames(c.UStack)))
	}
	t.attrs = a
	return a
}

// value appends v as the attribute key to a, if Options.Values sends it.
func (t *Traces) value(a []attribute.KeyValue, key string, v *call.Value) []attribute.KeyValue {
	if !sends(t.opts.Values, v) {
		return a
	}
	return append(a, t.attribute(key, v))
}

// sends says whether level sends v (see Values).
func sends(level Values, v *call.Value) bool {
	switch level {
	case ValuesNone:
		return false
	case ValuesAll:
		return true
	}
	switch v.Kind {
	case call.KindString:
		return !v.IsBuffer()
	case call.KindPointer:
		// NULL or a symbol's name, never an address.
		return v.Uint() == 0 || v.Str != ""
	case call.KindBytes, call.KindStruct, call.KindArray:
		return false
	}
	return true
}

// attribute returns v as an attribute (see the package documentation).
func (t *Traces) attribute(key string, v *call.Value) attribute.KeyValue {
	switch v.Kind {
	case call.KindInt, call.KindErrno:
		return attribute.Int64(key, v.Int())
	case call.KindUint:
		if v.Uint() <= math.MaxInt64 {
			return attribute.Int64(key, int64(v.Uint()))
		}
		return attribute.String(key, strconv.FormatUint(v.Uint(), 10))
	case call.KindBool:
		return attribute.Bool(key, v.Bool())
	case call.KindFloat:
		return attribute.Float64(key, v.Float())
	case call.KindEnum:
		if v.Str == "" {
			return t.attribute(key, &call.Value{Kind: call.KindUint, Bits: v.Bits})
		}
		return attribute.String(key, v.Str)
	case call.KindString:
		s := validUTF8(v.Str)
		if t.opts.Values == ValuesNames {
			s, _ = t.cut(s, min(NamesStringLimit, t.opts.AttributeLimit))
		}
		return attribute.String(key, s)
	case call.KindPointer:
		if v.Uint() == 0 {
			return attribute.String(key, "NULL")
		}
		fallthrough
	case call.KindBytes:
		// Their JSON is a string that needs no escaping.
		t.json = render.AppendJSONValue(t.json[:0], v)
		return attribute.String(key, strings.Trim(string(t.json), `"`))
	case call.KindStruct, call.KindArray:
		t.json = render.AppendJSONValue(t.json[:0], v)
		return attribute.String(key, string(t.json))
	}
	return attribute.String(key, "?")
}

// cutMark ends a string cut short.
const cutMark = "..."

// cut returns s, valid UTF-8, cut to limit bytes (at least len(cutMark))
// if it is longer: its first bytes, at a character boundary, and
// cutMark, counted in TraceStats.Cut. ok says whether it was cut.
func (t *Traces) cut(s string, limit int) (_ string, ok bool) {
	if len(s) <= limit {
		return s, false
	}
	n := limit - len(cutMark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	t.cuts.Add(1)
	return s[:n] + cutMark, true
}

// cutFrames returns the stack frames cut to Options.AttributeLimit: the
// same slice if none is longer, which is shared and never modified.
func (t *Traces) cutFrames(frames []string) []string {
	var out []string
	for i, f := range frames {
		s, ok := t.cut(f, t.opts.AttributeLimit)
		if ok && out == nil {
			out = slices.Clone(frames)
		}
		if out != nil {
			out[i] = s
		}
	}
	if out == nil {
		return frames
	}
	return out
}

// errnoName returns the error name of a return value, "" if it is none.
func errnoName(v *call.Value) string {
	if v.Kind != call.KindErrno {
		return ""
	}
	if v.Str != "" {
		return v.Str
	}
	return "E" + strconv.FormatInt(-v.Int(), 10)
}

var flagList = []struct {
	flag call.CallFlags
	name string
}{{call.EntryOnly, "entry_only"}, {call.ExitOnly, "exit_only"}, {call.Missed, "missed"}, {call.Origin, "origin"}}

func flagNames(f call.CallFlags) []string {
	if f == 0 {
		return nil
	}
	var names []string
	for _, fl := range flagList {
		if f&fl.flag != 0 {
			names = append(names, fl.name)
		}
	}
	return names
}

// validUTF8 replaces each byte of s that is not UTF-8 with U+FFFD, as
// render.JSON does: OTLP's strings must be UTF-8.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as one utf8.RuneError
	}
	return b.String()
}

// Flush does nothing: the spans are sent at least every
// Options.Interval.
func (t *Traces) Flush() error { return nil }

// Close sends the spans still queued, for at most Options.Timeout, and
// shuts the exporter down; see Shutdown.
func (t *Traces) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Timeout)
	defer cancel()
	return t.Shutdown(ctx)
}

// Shutdown sends the spans still queued until ctx is done, shuts the
// exporter down, and returns; when ctx is done first, it returns then,
// with ctx's error, and counts every span not yet sent as Failed, while
// the sender and the exporter end in the background. Call it on Call's
// goroutine; calls after it count as Failed.
func (t *Traces) Shutdown(ctx context.Context) error {
	if t.closed {
		return nil
	}
	t.closed = true
	close(t.in)
	start := time.Now()
	shut := func() error {
		// Nothing queued is left: short.
		sctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return errors.Join(t.provider.Shutdown(sctx), t.exp.Shutdown(sctx))
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		t.cancel()
		slog.Debug("otlp: traces shut down, cut short", "after", time.Since(start))
		go func() {
			<-t.done
			shut()
		}()
		return ctx.Err()
	}
	t.cancel()
	sent := time.Now()
	err := shut()
	slog.Debug("otlp: traces shut down", "sending", sent.Sub(start), "exporter", time.Since(sent))
	if err != nil {
		return fmt.Errorf("shut the OTLP trace exporter down: %w", err)
	}
	return nil
}

// Stats returns what became of the spans so far.
func (t *Traces) Stats() TraceStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Spans last: it counts a call before the others do.
	st := TraceStats{Exported: t.exported.Load(), Dropped: t.dropped.Load(), Failed: t.failed.Load(), Cut: t.cuts.Load(), Err: t.err}
	st.Spans = t.spans.Load()
	if t.abort.Err() != nil {
		// Shut down: what was not sent failed (the sender, if it is still
		// ending, sends nothing more).
		st.Failed = st.Spans - st.Exported - st.Dropped
	}
	return st
}

// collect is the span processor that puts each span ended into the
// batch; the SDK calls it on the sender's goroutine.
type collect struct{ t *Traces }

func (collect) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p collect) OnEnd(s sdktrace.ReadOnlySpan)                 { p.t.batch = append(p.t.batch, s) }
func (collect) Shutdown(context.Context) error                  { return nil }
func (collect) ForceFlush(context.Context) error                { return nil }

// presetIDs gives the SDK the ids Call chose for the span it starts.
type presetIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func (g *presetIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) { return g.trace, g.span }

func (g *presetIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return g.span }

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}
