// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update to accept):\n%s", name, got)
	}
}

// render runs calls through the renderer r writes to out.
func renderAll(t *testing.T, r render.Renderer, calls []call.Call) {
	t.Helper()
	for i := range calls {
		if err := r.Call(&calls[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

var testOptions = render.Options{WallOffset: wallAt, Location: time.UTC}

func TestTextGolden(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewText(&out, testOptions), testCalls(t))
	golden(t, "text.golden", out.Bytes())
}

func TestTextColorGolden(t *testing.T) {
	var out bytes.Buffer
	opts := testOptions
	opts.Color = true
	renderAll(t, render.NewText(&out, opts), testCalls(t)[:3])
	golden(t, "text-color.golden", out.Bytes())
}

func TestTextKernelClock(t *testing.T) {
	var out bytes.Buffer
	calls := testCalls(t)[5:6]
	renderAll(t, render.NewText(&out, render.Options{}), calls)
	want := "1000.000040 cat[5000/5001] __x64_sys_close(regs=0xffffc90000a3ff58) = -EBADF 1.5ms\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestJSONGolden(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewJSON(&out, testOptions), testCalls(t))
	golden(t, "json.golden", out.Bytes())
}

func TestTreeGolden(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewTree(&out, testOptions), testCalls(t))
	golden(t, "tree.golden", out.Bytes())
}

func TestChromeJSONGolden(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewChromeJSON(&out), testCalls(t))
	golden(t, "chromejson.golden", out.Bytes())
}
