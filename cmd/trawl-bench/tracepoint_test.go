// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
)

func TestPrintTracepointCalls(t *testing.T) {
	rows := []tpRow{
		// Ratios per round: 300 / 100 = 3, 500 / 200 = 2.5, 400 / 100
		// = 4; medians 1000, 1110, 1410, small 1210: 210 / 110.
		{tracepoint: "tp:task:task_rename", base: measure.Samples{1000, 1000, 1010}, empty: measure.Samples{1100, 1200, 1110}, trawl: measure.Samples{1300, 1500, 1410}, small: measure.Samples{1200, 1300, 1210}},
		{tracepoint: "tp:x:y", err: errors.New("attach failed\nsecond line")},
	}
	var b strings.Builder
	printTracepointCalls(&b, rows)
	want := []string{
		"| tp:task:task_rename | 1000 | 1110 | 1410 | 110 | 410 | 3.00 | 2.50-4.00 | 210 | 1.91 |",
		"| tp:x:y | error: attach failed | | | | | | | | |",
	}
	if got := rowsOf(b.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTracepointAttachRow(t *testing.T) {
	at := func(open, close time.Duration, attached int) measured {
		return measured{r: attachResult{open: open, close: close, attached: attached}}
	}
	open, floor := at(2*time.Second, time.Second, 198), at(time.Second, 500*time.Millisecond, 198)
	command := at(4*time.Second, 1500*time.Millisecond, 198)
	command.r.steps = "catalogue 1s, attach 2s"
	for _, c := range []struct {
		name              string
		command, bpftrace measured
		want              []string
	}{
		{"all", command, at(6*time.Second, 3*time.Second, 198), []string{
			"200", "198", "2s", "1s", "4s", "1.5s", "1s", "500ms", "2.00", "4.00", "6s", "3s", "1.50", "catalogue 1s, attach 2s",
		}},
		{"no bpftrace", command, measured{why: "not run: no bpftrace"}, []string{
			"200", "198", "2s", "1s", "4s", "1.5s", "1s", "500ms", "2.00", "4.00", "not run: no bpftrace", "", "", "catalogue 1s, attach 2s",
		}},
		{"command failed", measured{why: "error: boom"}, at(6*time.Second, 3*time.Second, 198), []string{
			"200", "198", "2s", "1s", "error: boom", "", "1s", "500ms", "2.00", "", "6s", "3s", "", "",
		}},
	} {
		got := tracepointAttachRow(200, open, floor, c.command, c.bpftrace)
		if len(got) != len(tracepointAttachColumns) || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: row %q, want %q (%d columns)", c.name, got, c.want, len(tracepointAttachColumns))
		}
	}
}
