// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/call"
)

// StatsOptions configure the Stats renderer.
type StatsOptions struct {
	Options
	// Interval is how often the table is written while calls come; 0 writes
	// it only at Close.
	Interval time.Duration
	// SortBy is the column rows are sorted by, largest first: one of
	// SortColumns; "" means "count". Ties sort by function name.
	SortBy string
	// Top limits the rows written; 0 writes all.
	Top int
	// Histogram names a function whose latency histogram is written below
	// the table.
	Histogram string
	// Source, if set, gives the figures, counted elsewhere (in the kernel:
	// Session.FunctionStats), each Interval and at Close; Call is then not
	// used.
	Source func() ([]call.FunctionStats, error)
}

// SortColumns are the valid values of StatsOptions.SortBy.
var SortColumns = []string{"count", "errors", "p50", "p90", "p99", "max", "total", "name"}

// Stats aggregates calls per function: call count, error count (negative
// error returns) and latency percentiles, written as a table every Interval
// and at Close. The figures are cumulative since the start. On a terminal
// (Options.Color) each table replaces the previous one on the screen.
type Stats struct {
	opts  StatsOptions
	mu    sync.Mutex // guards what follows, shared with the refresh goroutine
	w     *bufio.Writer
	funcs funcTable
	err   error
	stop  chan struct{}
	done  chan struct{}
}

type funcStats struct {
	name   string
	calls  uint64
	errors uint64
	total  uint64 // sum of durations, ns
	hist   call.Histogram
}

// load replaces the figures with those of Source; s.mu is held.
func (s *Stats) load() {
	fs, err := s.opts.Source()
	if err != nil {
		s.err = fmt.Errorf("read the statistics: %w", err)
		return
	}
	clear(s.funcs)
	for _, f := range fs {
		name := Escape(f.Func)
		if f.Module != "" {
			name = Escape(f.Module) + ":" + name
		}
		s.funcs[name] = &funcStats{name: name, calls: f.Calls, errors: f.Errors, total: f.Total, hist: f.Latency}
	}
}

// NewStats returns a Stats renderer writing to w. It checks SortBy.
func NewStats(w io.Writer, opts StatsOptions) (*Stats, error) {
	if opts.SortBy == "" {
		opts.SortBy = "count"
	}
	if !slices.Contains(SortColumns, opts.SortBy) {
		return nil, fmt.Errorf("sort column %q is not one of %s", opts.SortBy, strings.Join(SortColumns, ", "))
	}
	s := &Stats{opts: opts, w: bufio.NewWriter(w), funcs: funcTable{}}
	if opts.Interval > 0 {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.refresh()
	}
	return s, nil
}

// Call adds c to its function's figures.
func (s *Stats) Call(c *call.Call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.funcs.add(c)
	return s.err
}

// Close stops the refresh, writes the final table and flushes.
func (s *Stats) Close() error {
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write()
	return s.err
}

func (s *Stats) refresh() {
	defer close(s.done)
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.mu.Lock()
			if s.opts.Color {
				s.w.WriteString("\x1b[H\x1b[2J") // home, clear screen
			}
			s.write()
			s.w.WriteByte('\n')
			s.mu.Unlock()
		}
	}
}

// write writes the table and the histogram; s.mu is held.
func (s *Stats) write() {
	if s.opts.Source != nil && s.err == nil {
		s.load()
	}
	if s.err != nil {
		return
	}
	rows := s.funcs.rows(s.opts.SortBy)
	if s.opts.Top > 0 && len(rows) > s.opts.Top {
		rows = rows[:s.opts.Top]
	}
	width := len("FUNCTION")
	for _, f := range rows {
		width = max(width, len(f.name))
	}
	w := s.w
	if s.opts.Color {
		w.WriteString(colFunc)
	}
	fmt.Fprintf(w, "%-*s %10s %8s %9s %9s %9s %9s\n", width, "FUNCTION", "CALLS", "ERRORS", "P50", "P90", "P99", "MAX")
	if s.opts.Color {
		w.WriteString(colReset)
	}
	for _, f := range rows {
		fmt.Fprintf(w, "%-*s %10d %8d %9s %9s %9s %9s\n", width, f.name, f.calls, f.errors,
			latency(&f.hist, 0.5), latency(&f.hist, 0.9), latency(&f.hist, 0.99), latency(&f.hist, 1))
	}
	if f := s.funcs[s.opts.Histogram]; f != nil {
		writeHistogram(w, f)
	}
	s.err = w.Flush()
}

// funcTable holds the figures of each function, by name.
type funcTable map[string]*funcStats

// add adds c to its function's figures. Calls without a duration (their
// entry or exit not seen) count no latency.
func (t funcTable) add(c *call.Call) {
	name := Escape(c.Func)
	if c.Module != "" {
		name = Escape(c.Module) + ":" + name
	}
	f := t[name]
	if f == nil {
		f = &funcStats{name: name}
		t[name] = f
	}
	f.calls++
	if c.Ret.Kind == call.KindErrno {
		f.errors++
	}
	if c.Flags&(call.EntryOnly|call.ExitOnly) == 0 && c.Duration != 0 {
		f.hist.Record(c.Duration)
		f.total += c.Duration
	}
}

// rows returns the functions sorted by column col, largest first, then
// by name.
func (t funcTable) rows(col string) []*funcStats {
	rows := make([]*funcStats, 0, len(t))
	for _, f := range t {
		rows = append(rows, f)
	}
	slices.SortFunc(rows, func(a, b *funcStats) int {
		return cmp.Or(cmp.Compare(b.key(col), a.key(col)), strings.Compare(a.name, b.name))
	})
	return rows
}

// key returns the value sorted on for a column, larger first; "name" sorts
// only by the tie-break.
func (f *funcStats) key(col string) uint64 {
	switch col {
	case "count":
		return f.calls
	case "errors":
		return f.errors
	case "p50":
		return f.hist.Quantile(0.5)
	case "p90":
		return f.hist.Quantile(0.9)
	case "p99":
		return f.hist.Quantile(0.99)
	case "max":
		return f.hist.Max()
	case "total":
		return f.total
	}
	return 0
}

// latency formats a quantile, "-" without values.
func latency(h *call.Histogram, q float64) string {
	if h.Count() == 0 {
		return "-"
	}
	if q == 1 {
		return string(appendDuration(nil, h.Max()))
	}
	return string(appendDuration(nil, h.Quantile(q)))
}

// histogramWidth is the width of the longest bar.
const histogramWidth = 40

// writeHistogram writes f's latencies per power of two, as bars.
func writeHistogram(w io.Writer, f *funcStats) {
	counts := log2Counts(&f.hist)
	var most uint64
	first := -1
	for k, n := range counts {
		most = max(most, n)
		if n > 0 && first < 0 {
			first = k
		}
	}
	if first < 0 {
		return
	}
	fmt.Fprintf(w, "\n%s latency, %d calls:\n", f.name, f.hist.Count())
	for k := first; k < len(counts); k++ {
		var lo, hi uint64
		if k > 0 {
			lo, hi = 1<<(k-1), 1<<k
		} else {
			hi = 1
		}
		bar := int(counts[k] * histogramWidth / most)
		fmt.Fprintf(w, "[%7s, %7s) %10d |%-*s|\n", appendDuration(nil, lo), appendDuration(nil, hi),
			counts[k], histogramWidth, strings.Repeat("@", bar))
	}
}

// log2Counts returns h's counts per power of two: [2^k, 2^(k+1)) at
// index k+1, and 0 at index 0.
func log2Counts(h *call.Histogram) []uint64 {
	var out []uint64
	for _, b := range h.Buckets() {
		k := bits.Len64(b.Lo)
		if k >= len(out) {
			out = append(out, make([]uint64, k+1-len(out))...)
		}
		out[k] += b.Count
	}
	return out
}

// Flush does nothing: the statistics are written whole, at each interval
// and on Close.
func (s *Stats) Flush() error { return s.err }
