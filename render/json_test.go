// SPDX-License-Identifier: Apache-2.0

package render

import (
	"encoding/json"
	"testing"
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
