// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

func TestHTMLGolden(t *testing.T) {
	var out bytes.Buffer
	calls := append(stackCalls(), call.Call{Func: "<img src=x onerror=alert(1)>", Duration: 5,
		Stack: []string{`"><script>alert(2)</script>+0x1`}})
	renderAll(t, render.NewHTML(&out), calls)
	golden(t, "html.golden", out.Bytes())
	page := out.String()
	for _, bad := range []string{"<img", "<script>alert", "\x1b", "name\nhere"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
}

// TestHTMLOffline: the page refers to nothing on the network.
func TestHTMLOffline(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewHTML(&out), append(testCalls(t), stackCalls()...))
	if url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9]`).FindString(out.String()); url != "" {
		t.Errorf("the page refers to %q", url)
	}
	if !strings.Contains(out.String(), "tcp_sendmsg") {
		t.Error("the page lacks tcp_sendmsg")
	}
}
