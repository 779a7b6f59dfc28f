// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestReportRecording records the built-in workload with -f json
// --stack, then renders the recording with trawl report as a flame
// graph's folded stacks and as an HTML page: the traced function is the
// leaf of stacks of real kernel frames, down from the system call. Run
// on every guest: the stacks come from each kernel's unwinder and
// backend (a trampoline's stack lacks the function, which trawl adds).
func TestReportRecording(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "a recording and its report", guest.SpareArm64)
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.json")
	_, stderr, status := runLimited(t, trawlCmd("-f", "json", "--stack", "-o", rec, "--workload", workloadFunc), startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("recording: status %d\n%s", status, stderr)
	}
	checkSummary(t, stderr)
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var first struct{ Func string }
	if err := json.Unmarshal(b[:max(strings.IndexByte(string(b), '\n'), 0)], &first); err != nil || first.Func != workloadFunc {
		t.Fatalf("the recording's first line is not a call of %s (%v):\n%.500s", workloadFunc, err, b)
	}
	t.Logf("the first call recorded: %.1000s", b)

	folded, stderr, status := runLimited(t, trawlCmd("report", "-f", "folded", rec), time.Minute)
	if status != 0 || folded == "" {
		t.Fatalf("report -f folded: status %d, stderr:\n%s", status, stderr)
	}
	t.Logf("report -f folded:\n%s%s", folded, stderr)
	data := dataSymbols(t)
	found := false
	for line := range strings.Lines(folded) {
		stack, count, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		frames := strings.Split(stack, ";")
		if !ok || count == "0" || strings.Contains(count, " ") {
			t.Errorf("not a folded line: %q", line)
			continue
		}
		if frames[len(frames)-1] != workloadFunc {
			t.Errorf("the leaf of %q is not %s", line, workloadFunc)
		}
		for _, f := range frames {
			if f == "" || strings.Contains(f, "+0x") {
				t.Errorf("frame %q of %q: want a function's name", f, line)
			}
			// The capture program and its trampoline, loaded after
			// kallsyms was read, once showed as a module's data.
			if _, name, ok := strings.Cut(f, ":"); ok && data[name] || data[f] {
				t.Errorf("frame %q of %q is a data symbol, not code", f, line)
			}
		}
		// Folded frames have no offset: "do_syscall_64", not
		// "do_syscall_64+0x82".
		if slices.ContainsFunc(frames[:len(frames)-1], func(f string) bool { return isSyscallEntry(f + "+") }) {
			found = true
		}
	}
	if !found {
		t.Errorf("no stack of %s down from a system call:\n%s", workloadFunc, folded)
	}

	page := filepath.Join(dir, "report.html")
	_, stderr, status = runLimited(t, trawlCmd("report", "-f", "html", "-o", page, rec), time.Minute)
	if status != 0 {
		t.Fatalf("report -f html: status %d, stderr:\n%s", status, stderr)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<td data-v=\"" + workloadFunc + "\">", "<svg", "<title>" + workloadFunc + ": "} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// dataSymbols returns the names of the kernel's data symbols (kallsyms
// types d, r and b), which hold no code.
func dataSymbols(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 3 && strings.ContainsAny(f[1], "dDrRbB") {
			data[f[2]] = true
		}
	}
	return data
}
