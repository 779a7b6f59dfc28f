// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/call"
)

func TestJSONString(t *testing.T) {
	for _, s := range []string{"plain", "quote\" back\\ nl\n tab\t ctl\x01", "bad\xff\xfeutf8", "é ✓ \u2028", ""} {
		var got string
		b := appendJSONString(nil, s)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %v: %s", s, err, b)
		}
		var want string
		for _, r := range s { // each invalid byte becomes U+FFFD
			want += string(r)
		}
		if got != want {
			t.Errorf("%q: round trip gives %q", s, got)
		}
	}
}

// TestJSONEvent writes a tracepoint's event: its kind, its arguments, and
// no flags, duration or return value.
func TestJSONEvent(t *testing.T) {
	var out bytes.Buffer
	r := NewJSON(&out, Options{})
	c := call.Call{TS: 7, Func: "tp:skb:kfree_skb", Flags: call.Event,
		Args: []call.Value{{Name: "reason", Kind: call.KindEnum, Str: "SKB_DROP_REASON_NOT_SPECIFIED", Bits: 2}}}
	if err := r.Call(&c); err != nil {
		t.Fatal(err)
	}
	r.Close()
	want := `{"ts":7,"cpu":0,"pid":0,"tid":0,"comm":"","func":"tp:skb:kfree_skb","kind":"tracepoint","args":{"reason":"SKB_DROP_REASON_NOT_SPECIFIED"},"depth":0}` + "\n"
	if out.String() != want {
		t.Errorf("got  %s\nwant %s", out.String(), want)
	}
}

// TestWallClock checks the JSON renderer's times against time's
// RFC3339Nano, in order and out of order, at minute boundaries, with
// and without nanoseconds, and before 1970.
func TestWallClock(t *testing.T) {
	var w wallClock
	base := int64(1_700_000_000_000_000_000)
	times := []int64{base, base + 1, base + 999_999_999, base + 1_000_000_000, base + 59_999_999_999,
		base + 60_000_000_000, base - 1, base + 120_500_000_000, base + 10, 0, 59_999_999_999, -1, -60_000_000_001,
		253402300799_999_999_999 % (1 << 62)}
	for i := range int64(2000) {
		times = append(times, base+i*7_777_777_777+i%3*1000)
	}
	for _, ns := range times {
		got := string(w.appendTime(nil, ns))
		want := time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
		if got != want {
			t.Errorf("appendTime(%d) = %s, want %s", ns, got, want)
		}
	}
}
