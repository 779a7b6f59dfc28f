// SPDX-License-Identifier: Apache-2.0

// Package measure runs trawl-bench's measurements in turns, round after
// round, and prints what they measured as Markdown tables: medians,
// ranges and ratios.
package measure

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Runs are what a case measured, one result per round it ran, and the
// error that stopped it.
type Runs[T any] struct {
	Results []T
	Err     error
}

// Turns measures each case rounds times, one of each per round, so that a
// slow spell of the host falls on all alike; a case measures once in
// round k (from 0). A case whose measurement fails is not measured again.
// Turns stops with ctx's error once ctx is done.
func Turns[T any](ctx context.Context, rounds int, cases []func(k int) (T, error)) ([]Runs[T], error) {
	runs := make([]Runs[T], len(cases))
	for k := range rounds {
		for i, c := range cases {
			if runs[i].Err != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return runs, err
			}
			r, err := c(k)
			if err != nil {
				runs[i].Err = err
				continue
			}
			runs[i].Results = append(runs[i].Results, r)
		}
	}
	return runs, nil
}

// Fastest returns the result that took the least time, the first of
// equals: load on the host only ever slows a run down. It returns the
// zero T when there are none.
func Fastest[T any](results []T, took func(T) time.Duration) T {
	var best T
	for i, r := range results {
		if i == 0 || took(r) < took(best) {
			best = r
		}
	}
	return best
}

// Samples are one quantity measured once per round.
type Samples []float64

// Collect returns one quantity of each result.
func Collect[T any](results []T, quantity func(T) float64) Samples {
	s := make(Samples, len(results))
	for i, r := range results {
		s[i] = quantity(r)
	}
	return s
}

// Median returns the median of s, NaN when s is empty.
func (s Samples) Median() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	sorted := slices.Sorted(slices.Values(s))
	if len(sorted)%2 == 1 {
		return sorted[len(sorted)/2]
	}
	return (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
}

// Min returns the least of s, NaN when s is empty.
func (s Samples) Min() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return slices.Min(s)
}

// Max returns the greatest of s, NaN when s is empty.
func (s Samples) Max() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return slices.Max(s)
}

// Over returns, round by round, what x adds to base over what ref adds
// to it: (x - base) / (ref - base). The three hold the same rounds.
func Over(x, base, ref Samples) Samples {
	out := make(Samples, len(x))
	for i := range x {
		out[i] = Ratio(x[i], base[i], ref[i])
	}
	return out
}

// Ratio returns what x adds to base over what ref adds to it.
func Ratio(x, base, ref float64) float64 { return (x - base) / (ref - base) }

// Ns formats nanoseconds (or any count) to the unit.
func Ns(x float64) string { return fmt.Sprintf("%.0f", x) }

// Times formats a ratio to two decimals.
func Times(x float64) string { return fmt.Sprintf("%.2f", x) }

// Range formats the least and the greatest of ratios as "min-max".
func Range(ratios Samples) string { return Times(ratios.Min()) + "-" + Times(ratios.Max()) }

// Table writes a Markdown table row by row, so that the rows measured
// so far are out should the run end early.
type Table struct {
	w    io.Writer
	cols int
}

// NewTable writes the header of a table of the columns named, and
// returns the table to write the rows into.
func NewTable(w io.Writer, columns ...string) *Table {
	t := &Table{w: w, cols: len(columns)}
	t.Row(columns...)
	fmt.Fprintln(w, strings.Repeat("|---", len(columns))+"|")
	return t
}

// Row writes a row of cells, which may stop short of the last columns:
// those are left empty.
func (t *Table) Row(cells ...string) {
	var b strings.Builder
	for i := range max(t.cols, len(cells)) {
		b.WriteString("|")
		if i < len(cells) && cells[i] != "" {
			b.WriteString(" " + cells[i])
		}
		b.WriteString(" ")
	}
	b.WriteString("|")
	fmt.Fprintln(t.w, b.String())
}

// End ends the table with an empty line.
func (t *Table) End() { fmt.Fprintln(t.w) }
