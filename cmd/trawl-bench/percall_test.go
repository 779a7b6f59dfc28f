// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// testRows are two rounds of fentry, with floor programs, and one of
// kprobe-multi without, then a backend the kernel lacks and one that
// failed.
func testRows() []callRow {
	fentry := []callRound{
		{base: 100, empty: 120, floor: 130, trawl: 150, stats: 140, statsFloor: 125, show: 160, gated: 110, stack: 200, ustack: 210, untracked: 115, filtered: 112, gatedEmpty: 120, statsStack: 170},
		{base: 100, empty: 140, floor: 150, trawl: 180, stats: 160, statsFloor: 135, show: 190, gated: 120, stack: 260, ustack: 250, untracked: 125, filtered: 121, gatedEmpty: 130, statsStack: 190},
	}
	kprobe := []callRound{{base: 200, empty: 300, floor: math.NaN(), trawl: 350, stats: 325, statsFloor: math.NaN(), show: 400, gated: 250, stack: 450, ustack: 400, untracked: 260, filtered: 255, gatedEmpty: 300, statsStack: 375}}
	return []callRow{
		{"fentry", seriesOf(fentry), nil},
		{"kprobe-multi", seriesOf(kprobe), nil},
		{"fsession", callSeries{}, fmt.Errorf("load: %w", ebpf.ErrNotSupported)},
		{"kprobe", callSeries{}, errors.New("attach failed\nsecond line")},
	}
}

// rowsOf returns the rows of the table out holds, after its rule.
func rowsOf(out string) []string {
	_, table, _ := strings.Cut(out, "|---")
	_, body, _ := strings.Cut(table, "\n")
	return strings.Split(strings.TrimSpace(body), "\n")
}

func TestPrintCalls(t *testing.T) {
	var b strings.Builder
	printCalls(&b, testRows())
	// fentry, medians: base 100, empty 130, floor 140, trawl 165, stats
	// 150, show 175; ratios per round (trawl - base) / (empty - base):
	// 2.5 and 2, median 2.25.
	want := []string{
		"| fentry | 100 | 130 | 140 | 165 | 30 | 40 | 65 | 1.33 | 1.62 | 2.25 | 2.00-2.50 | 50 | 1.67 | 175 | 10 |",
		"| kprobe-multi | 200 | 300 | - | 350 | 100 | - | 150 | - | - | 1.50 | 1.50-1.50 | 125 | 1.25 | 400 | 50 |",
		"| fsession | not supported by this kernel | | | | | | | | | | | | | | |",
		"| kprobe | error: attach failed | | | | | | | | | | | | | | |",
	}
	if got := rowsOf(b.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPrintStatsGateTrack(t *testing.T) {
	for _, c := range []struct {
		name  string
		print func(*strings.Builder)
		want  []string
	}{
		// Stats floor median 130: (130 - 100) / (130 - 100) = 1, stats
		// 150: 50 / 30 = 1.67, stats / floor 50 / 30; kprobe-multi has
		// no stats floor.
		{"stats", func(b *strings.Builder) { printStats(b, testRows()) }, []string{
			"| fentry | 30 | 30 | 50 | 1.00 | 1.67 | 1.67 |",
		}},
		// Gated over the gated empty programs, per round: 10 / 20 and
		// 20 / 30; stack / trawl: (230 - 100) / (165 - 100) = 2, and
		// the user stack's the same; kprobe-multi's (400 - 200) / 150;
		// stats stack / stats: (180 - 100) / (150 - 100), and
		// kprobe-multi's (375 - 200) / (325 - 200).
		{"gate", func(b *strings.Builder) { printGateStack(b, testRows()) }, []string{
			"| fentry | 25 | 15 | 0.58 | 0.50-0.67 | 65 | 130 | 2.00 | 130 | 2.00 | 80 | 1.60 |",
			"| kprobe-multi | 100 | 50 | 0.50 | 0.50-0.50 | 150 | 250 | 1.67 | 200 | 1.33 | 175 | 1.40 |",
		}},
		// Untracked over the empty programs, per round: 15 / 20 and 25 /
		// 40.
		{"track", func(b *strings.Builder) { printTrack(b, testRows()) }, []string{
			"| fentry | 30 | 15 | 16 | 20 | 4 | 0.69 | 0.62-0.75 |",
			"| kprobe-multi | 100 | 50 | 55 | 60 | 5 | 0.60 | 0.60-0.60 |",
		}},
	} {
		var b strings.Builder
		c.print(&b)
		if got := rowsOf(b.String()); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s rows:\n%s\nwant:\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}
