// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/trawl-dev/trawl/call"
)

// discard is an exporter that takes every span and does nothing.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkSpan measures what exporting a call costs the reading
// goroutine (queueing a copy: the sender's goroutine makes the span), and
// how many of the calls the sender kept up with: a call of three
// arguments, one a struct, nested in another.
func BenchmarkSpan(b *testing.B) {
	tr, err := NewTracesTo(discard{}, Options{WallOffset: wall})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	c := call.Call{TS: 1, Duration: 100, PID: 1, TID: 1, Comm: "bench", Func: "vfs_read", Depth: 1, Args: []call.Value{
		{Name: "file", Kind: call.KindPointer, Bits: 0xffff888000000000},
		{Name: "count", Kind: call.KindUint, Bits: 4096},
		{Name: "pos", Kind: call.KindStruct, Fields: []call.Value{{Name: "v", Kind: call.KindInt, Bits: 10}}},
	}, Ret: call.Value{Kind: call.KindInt, Bits: 4096}}
	b.ReportAllocs()
	for b.Loop() {
		tr.Call(&c)
	}
	b.StopTimer()
	tr.Close()
	st := tr.Stats()
	b.ReportMetric(float64(st.Exported)/float64(st.Spans), "sent/call")
}
