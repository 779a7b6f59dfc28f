// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"io"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/decode/decodetest"
	"github.com/trawl-dev/trawl/render"
)

// benchmarkRender decodes and renders tcp_sendmsg(struct sock *sk, struct
// msghdr *msg, size_t size) events with 256 captured bytes of sock.
func benchmarkRender(b *testing.B, newRenderer func(io.Writer) render.Renderer) {
	bld := newBuilder(b)
	proto, err := decodetest.Func(bld.spec, "tcp_sendmsg")
	if err != nil {
		b.Fatal(err)
	}
	sock := bld.pointee("tcp_sendmsg", "sk", 256, map[string]uint64{
		"__sk_common.skc_family": 2,
		"__sk_common.skc_num":    41234,
		"__sk_common.skc_dport":  be16(8080),
		"__sk_common.skc_state":  1,
	})
	raws := []decode.Raw{
		{Slots: [2]uint64{0xffff888003a1c000}, Data: sock},
		{Slots: [2]uint64{0xffffc90000b1bd80}},
		{Slots: [2]uint64{5}},
	}
	r := newRenderer(io.Discard)
	dec := decode.NewDecoder(decode.Options{}, testSymbols)
	args := make([]call.Value, len(raws))
	c := call.Call{CPU: 1, PID: 4242, TID: 4242, Comm: "curl", Func: "tcp_sendmsg"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j, p := range proto.Params {
			args[j] = dec.Arg(p.Name, p.Type, raws[j])
		}
		c.Args = args
		c.Ret = dec.Ret(proto.Return, 5)
		c.TS = t0 + uint64(i)*1000
		c.Duration = 12345
		if err := r.Call(&c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkText(b *testing.B) {
	benchmarkRender(b, func(w io.Writer) render.Renderer { return render.NewText(w, testOptions) })
}

func BenchmarkJSON(b *testing.B) {
	benchmarkRender(b, func(w io.Writer) render.Renderer { return render.NewJSON(w, testOptions) })
}

func BenchmarkChromeJSON(b *testing.B) {
	benchmarkRender(b, func(w io.Writer) render.Renderer { return render.NewChromeJSON(w) })
}

func BenchmarkPerfettoProto(b *testing.B) {
	benchmarkRender(b, func(w io.Writer) render.Renderer { return render.NewPerfettoProto(w, testOptions) })
}
