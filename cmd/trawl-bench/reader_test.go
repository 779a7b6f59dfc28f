// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

func TestParseSummary(t *testing.T) {
	stderr := "trawl: tracing 1 functions with fentry\n" +
		"trawl: 200000 calls: 24542 read, 36074 not read (the trace stopped first), 139384 dropped (ring buffer full), 0 filtered out at exit; 1 functions attached, 0 skipped\n"
	got, err := parseSummary(stderr)
	if err != nil {
		t.Fatal(err)
	}
	if want := (liveCount{read: 24542, dropped: 139384}); got != want {
		t.Errorf("parseSummary = %+v, want %+v", got, want)
	}
	if _, err := parseSummary("trawl: tracing 1 functions with fentry\n"); err == nil {
		t.Error("parseSummary found a summary in output without one")
	}
}
