// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"encoding/json"
	"testing"

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
