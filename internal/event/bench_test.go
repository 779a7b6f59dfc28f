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
	benchmarkDecodeJSON(b, p, raw)
}

// BenchmarkDecodeJSONRegs is BenchmarkDecodeJSON for the record of a
// system call's entry point, whose one argument is the struct pt_regs
// of the call: about twenty registers, as getppid(2)'s records hold.
func BenchmarkDecodeJSONRegs(b *testing.B) {
	p, raw := sampleRecord(b, "__x64_sys_close", []uint64{0xffffc90000b1bf58}, map[string]map[string]uint64{
		"regs": {"di": 3, "orig_ax": 3, "ip": 0x7f0012345678, "sp": 0x7ffd00001000, "cs": 0x33, "ss": 0x2b, "flags": 0x246},
	})
	benchmarkDecodeJSON(b, p, raw)
}

func benchmarkDecodeJSON(b *testing.B, p *plan.Plan, raw []byte) {
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
