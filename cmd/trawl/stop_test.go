// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl"
)

// TestSummary checks that the summary of a trace that lost nothing is one
// line, that a lossy one names only the counts that are not zero, and that
// --debug writes every count.
func TestSummary(t *testing.T) {
	clean := trawl.Stats{Calls: 10, Received: 10, Attached: 2, RecursionMisses: map[string]uint64{"fentry_capture": 0, "fexit_capture": 0}}
	lossy := clean
	lossy.Drops, lossy.Calls = 5, 15
	lossy.Filtered, lossy.MissExit, lossy.MissPIDs = 7, 3, 1
	lossy.OutsideEntry, lossy.Chains = 4, 2
	lossy.RecursionMisses = map[string]uint64{"fentry_capture": 2, "fexit_capture": 0}
	for _, tc := range []struct {
		name  string
		st    trawl.Stats
		debug bool
		want  string
	}{
		{"clean", clean, false, "trawl: 10 calls: 10 read, 0 not read (the trace stopped first), 0 dropped (ring buffer full), 0 filtered out at exit; 2 functions attached, 0 skipped\n"},
		{"lossy", lossy, false, "trawl: 15 calls: 10 read, 0 not read (the trace stopped first), 5 dropped (ring buffer full), 0 filtered out at exit; 2 functions attached, 0 skipped\n" +
			"trawl: filtered in the kernel at entry: 7 by task (pid, comm, cgroup)\n" +
			"trawl: missed: 3 entries without exit, 1 children not followed (pids map full)\n" +
			"trawl: --entry: 4 calls outside every entry call left out in the kernel, 2 error chains\n" +
			"trawl: recursion misses: fentry_capture 2\n"},
		{"clean with --debug", clean, true, "trawl: 10 calls: 10 read, 0 not read (the trace stopped first), 0 dropped (ring buffer full), 0 filtered out at exit; 2 functions attached, 0 skipped\n" +
			"trawl: filtered in the kernel at entry: 0 by task (pid, comm, cgroup), 0 by --filter\n" +
			"trawl: missed: 0 entries without task storage, 0 calls nested too deep, 0 exits without entry, 0 entries without exit, 0 calls without their captured memory (frame evicted), 0 children not followed (pids map full)\n" +
			"trawl: recursion misses: fentry_capture 0, fexit_capture 0\n"},
		{"lossy with --debug", lossy, true, "trawl: 15 calls: 10 read, 0 not read (the trace stopped first), 5 dropped (ring buffer full), 0 filtered out at exit; 2 functions attached, 0 skipped\n" +
			"trawl: filtered in the kernel at entry: 7 by task (pid, comm, cgroup), 0 by --filter\n" +
			"trawl: missed: 0 entries without task storage, 0 calls nested too deep, 0 exits without entry, 3 entries without exit, 0 calls without their captured memory (frame evicted), 1 children not followed (pids map full)\n" +
			"trawl: --entry: 4 calls outside every entry call left out in the kernel, 2 error chains, 0 chain calls lost (chain buffer full)\n" +
			"trawl: recursion misses: fentry_capture 2, fexit_capture 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			summary(&b, tc.st, tc.debug)
			if got := b.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	var esc bytes.Buffer
	summary(&esc, trawl.Stats{Calls: 1, Received: 1, Attached: 1, Skipped: trawl.Skips{"busy": {"f\x1b]0;x\a"}}}, false)
	if got := esc.String(); strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, `trawl: skipped 1 busy (e.g. f\x1b]0;x\x07)`) {
		t.Errorf("a skipped function's name not escaped:\n%q", got)
	}
	var b bytes.Buffer
	summary(&b, trawl.Stats{Calls: 10, Counted: 10, Attached: 2}, false)
	if got := b.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "10 counted in the kernel") {
		t.Errorf("--stats, nothing lost:\n%s", got)
	}
}
