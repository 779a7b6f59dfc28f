// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
	"github.com/trawl-dev/trawl/render"
)

// recording writes calls as trawl -f json -o FILE does, into a file of
// dir.
func recording(t *testing.T, dir string, calls ...call.Call) string {
	t.Helper()
	var b bytes.Buffer
	r := render.NewJSON(&b, render.Options{WallOffset: 1_700_000_000_000_000_000})
	for i := range calls {
		if err := r.Call(&calls[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rec.json")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var readStack = []string{"vfs_read+0x0", "ksys_read+0x6b", "do_syscall_64+0x82"}

// reportCalls are the calls of the recordings of the tests: one with a
// stack and a duration, one that failed, one whose exit was not seen.
var reportCalls = []call.Call{
	{TS: 1000, Duration: 1500, PID: 7, TID: 7, Comm: "cat", Func: "vfs_read", Ret: call.Value{Kind: call.KindInt, Bits: 5}, Stack: readStack},
	{TS: 3000, Duration: 2500, PID: 7, TID: 7, Comm: "cat", Func: "vfs_read", Ret: call.Value{Kind: call.KindErrno, Bits: uint64(^uint64(4) + 1), Str: "EINTR"}, Stack: readStack},
	{TS: 5000, PID: 7, TID: 7, Comm: "cat", Func: "vfs_write", Flags: call.EntryOnly},
}

// TestReport writes a recording in each format report knows.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	rec := recording(t, dir, reportCalls...)
	for format, want := range map[string]string{
		"text":        "cat[7] vfs_read() = -EINTR 2.5µs\n    vfs_read+0x0\n",
		"tree":        "vfs_write() = ? (no exit)",
		"json":        string(must(os.ReadFile(rec))),
		"stats":       "vfs_read           2        1     1.5µs     2.5µs     2.5µs     2.5µs\n",
		"folded":      "do_syscall_64;ksys_read;vfs_read 2\nvfs_write 1\n",
		"chrome-json": `"name":"vfs_read","cat":"vmlinux","ph":"X","dur":2.500`,
		"html":        "<svg",
		"perfetto":    "vfs_read",
	} {
		out := filepath.Join(dir, format)
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{"report", "-f", format, "-o", out, rec}, &stdout, &stderr); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		got := string(must(os.ReadFile(out)))
		if !strings.Contains(got, want) {
			t.Errorf("%s: output lacks %q:\n%s", format, want, got)
		}
		if format == "json" && got != want {
			t.Errorf("json: the recording written again differs:\n%s", got)
		}
		if stdout.Len() > 0 {
			t.Errorf("%s: with -o, stdout got %q", format, stdout.String())
		}
		lacks := "1 of 3 calls have no duration"
		if strings.Contains(stderr.String(), lacks) != (format != "json" && format != "folded") {
			t.Errorf("%s: stderr %q; want %q said where durations are shown", format, stderr.String(), lacks)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestReportLacks: what a recording lacks is said, not made up.
func TestReportLacks(t *testing.T) {
	dir := t.TempDir()
	noStacks := recording(t, dir, call.Call{Func: "vfs_read", Duration: 10}, call.Call{Func: "vfs_read", Flags: call.ExitOnly})
	for _, tc := range []struct {
		format, out, err string
	}{
		{"folded", "vfs_read 2\n", "trawl: the recording has no stacks (record with --stack): each call counts under its function alone\n"},
		{"stats", "vfs_read          2        0", "trawl: 1 of 2 calls have no duration (their entry or exit was not seen, or the recording lacks it): they count in no latency figure\n"},
	} {
		var stdout, stderr bytes.Buffer
		if err := runReport([]string{"-"}, reportFlags{format: tc.format}, must(os.Open(noStacks)), &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout.String(), tc.out) || stderr.String() != tc.err {
			t.Errorf("%s: stdout %q, stderr %q; want %q and %q", tc.format, stdout.String(), stderr.String(), tc.out, tc.err)
		}
	}
	// User stacks alone are stacks: nothing is said missing.
	userStacks := recording(t, dir, call.Call{Func: "vfs_read", Duration: 10, UStack: []string{"read+0x10 [libc.so.6]", "main+0x8 [cat]"}})
	var out, errOut bytes.Buffer
	if err := runReport([]string{"-"}, reportFlags{format: "folded"}, must(os.Open(userStacks)), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if out.String() != "cat:main;libc.so.6:read;vfs_read 1\n" || errOut.String() != "" {
		t.Errorf("user stacks: stdout %q, stderr %q", out.String(), errOut.String())
	}
	var stdout, stderr bytes.Buffer
	if err := runReport([]string{"-"}, reportFlags{format: "stats"}, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "FUNCTION") || stderr.String() != "trawl: the recording holds no calls\n" {
		t.Errorf("empty recording: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestReportErrors runs the real command: bad input is an error naming
// the file and line (status 1), a bad command line a usage error
// (status 2), and the output file is opened as the trace opens it.
func TestReportErrors(t *testing.T) {
	guest.HostOnly(t)
	dir := t.TempDir()
	rec := recording(t, dir, reportCalls...)
	good := string(must(os.ReadFile(rec)))
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(good+"not json\n"), 0o600)
	cut := filepath.Join(dir, "cut.json")
	os.WriteFile(cut, []byte(good[:len(good)-20]), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(filepath.Join(dir, "target"), link)
	for _, tc := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"report", bad}, 1, bad + ": line 4: invalid character 'o' in literal null"},
		{[]string{"report", rec, cut}, 1, cut + ": line 3: the line ends inside its JSON object (a truncated line?)"},
		{[]string{"report", filepath.Join(dir, "none")}, 1, "cannot read the recording: open " + filepath.Join(dir, "none") + ": no such file or directory"},
		{[]string{"report"}, 2, "report needs a recording"},
		{[]string{"report", "-f", "xml", rec}, 2, `--format "xml": want one of text, tree, json, stats, folded, perfetto, chrome-json, html`},
		{[]string{"report", "-f", "perfetto", rec}, 2, "name its file with -o FILE"},
		{[]string{"report", "-", "-"}, 2, "standard input (-) can be read only once"},
		{[]string{"report", "-o", rec, rec}, 2, "writing it would erase it"},
		{[]string{"report", "-o", link, rec}, 2, "is a symbolic link"},
		{[]string{"report", "--frobnicate", rec}, 2, "unknown flag: --frobnicate"},
	} {
		_, stderr, status := runReal(t, tc.args...)
		if status != tc.status || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", tc.args, status, stderr, tc.status, tc.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "target")); err == nil {
		t.Error("report wrote through a symbolic link")
	}
	if got := string(must(os.ReadFile(rec))); got != good {
		t.Error("report changed the recording")
	}
}
