// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trawl-dev/trawl/internal/render/perfettopb"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// workloadFunc is a function trawl's built-in workload calls: it opens a
// file.
const workloadFunc = "do_sys_openat2"

// TestFormats traces the built-in workload with each way the command line
// writes calls (text, JSON lines, the tree that holds calls until their
// entry ends, in-kernel statistics, a Perfetto file; chosen by --format or
// by an alias: TestFormatChosen checks on the host that both choose the
// same), and checks each output has the workload's calls in its shape;
// and that --quiet leaves only the summary on stderr, and a small
// --ring-buffer-size is taken (TestRingBufferSizeLoaded in package trawl
// checks the map's size). The renderers themselves are checked against
// calls captured in every guest (TestFormatsAgree).
func TestFormats(t *testing.T) {
	guest.Require(t)
	if k := guest.Kernel(); k != guest.SpareAmd64 {
		// The formats are user space: TestFormatsAgree checks each
		// against calls captured in every guest, the host tests the
		// flags that choose them.
		t.Skipf("the command line's outputs are traced on %s only, to keep make test within the CI budget; this is %s", guest.SpareAmd64, k)
	}
	dir := t.TempDir()
	jsonLines := func(t *testing.T, out []byte) {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for _, line := range lines {
			var call struct{ Func string }
			if err := json.Unmarshal([]byte(line), &call); err != nil || call.Func != workloadFunc {
				t.Errorf("not a JSON call of %s: %q (%v)", workloadFunc, line, err)
			}
		}
	}
	text := func(t *testing.T, out []byte) {
		if !bytes.Contains(out, []byte(workloadFunc+"(")) || bytes.Contains(out, []byte("\x1b[")) {
			t.Errorf("no uncoloured call of %s:\n%s", workloadFunc, out)
		}
	}
	tree := func(t *testing.T, out []byte) {
		if !bytes.Contains(out, []byte(" cpu ")) || !bytes.Contains(out, []byte(workloadFunc+"(")) {
			t.Errorf("no call tree of %s:\n%s", workloadFunc, out)
		}
	}
	stats := func(t *testing.T, out []byte) {
		if !bytes.Contains(out, []byte("FUNCTION")) || !bytes.Contains(out, []byte(workloadFunc+" ")) {
			t.Errorf("no statistics of %s:\n%s", workloadFunc, out)
		}
	}
	perfetto := func(t *testing.T, out []byte) {
		var trace perfettopb.Trace
		if err := proto.Unmarshal(out, &trace); err != nil || len(trace.GetPacket()) == 0 || !bytes.Contains(out, []byte(workloadFunc)) {
			t.Errorf("not a Perfetto trace with %s (%d bytes): %v", workloadFunc, len(out), err)
		}
	}
	for i, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, out []byte)
	}{
		{"text", nil, text},
		{"json-quiet", []string{"--json", "-q", "--ring-buffer-size", "64K"}, jsonLines},
		{"format-tree", []string{"--format=tree"}, tree},
		{"format-stats", []string{"-f", "stats"}, stats},
		{"perfetto", []string{"--perfetto"}, perfetto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The output goes to a file: the workload writes a line of
			// its own to stdout.
			file := filepath.Join(dir, strconv.Itoa(i))
			args := append(slices.Clone(tc.args), "-o", file)
			if tc.name == "perfetto" {
				args = append(slices.Clone(tc.args), file) // --perfetto FILE
			}
			cmd := trawlCmd(append(args, "--workload", workloadFunc)...)
			_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			checkSummary(t, stderr)
			quiet := tc.name == "json-quiet"
			if strings.Contains(stderr, "trawl: tracing") == quiet {
				t.Errorf("quiet %v, stderr:\n%s", quiet, stderr)
			}
			out, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

// TestHistNotSelected: --hist of a function the patterns do not select is
// refused with the usage status, after the session selected (the
// catalogue is read once) and before -o's file is touched.
func TestHistNotSelected(t *testing.T) {
	guest.Require(t)
	if k := guest.Kernel(); k != guest.SpareAmd64 {
		t.Skipf("the check is user space, traced on %s only to keep make test within the CI budget; this is %s", guest.SpareAmd64, k)
	}
	existing := filepath.Join(t.TempDir(), "existing")
	if err := os.WriteFile(existing, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := trawlCmd("--stats", "--hist", "vfs_write", "-o", existing, "--workload", workloadFunc)
	_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 2 || !strings.Contains(stderr, "--hist vfs_write: not among the selected functions") {
		t.Errorf("status %d, want 2 and the reason; stderr:\n%s", status, stderr)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me\n" {
		t.Errorf("-o's file changed: %q", b)
	}
}
