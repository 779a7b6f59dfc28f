// SPDX-License-Identifier: Apache-2.0

package event

import (
	"io"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/render"
)

// BenchmarkDecodeJSON measures the user-space path of one call, from the
// ring buffer's bytes to a line of JSON: Parse, Decoder.Call and the JSON
// renderer, for the record of tcpSendmsg.
func BenchmarkDecodeJSON(b *testing.B) {
	p, raw := tcpSendmsg(b)
	dec := NewDecoder([]*plan.Plan{p}, decode.Options{}, nil)
	r := render.NewJSON(io.Discard, render.Options{WallOffset: 1_700_000_000_000_000_000, Location: time.UTC})
	var c call.Call
	b.ReportAllocs()
	for b.Loop() {
		rec, err := Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		if err := dec.Call(&rec, &c); err != nil {
			b.Fatal(err)
		}
		if err := r.Call(&c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
}
