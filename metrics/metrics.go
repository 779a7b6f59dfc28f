// SPDX-License-Identifier: Apache-2.0

// Package metrics serves what an aggregating trace counts in the kernel
// (trawl.Config.Aggregate, `trawl --stats`) as Prometheus metrics, read
// from the kernel at each scrape: nothing is done per call in user space.
//
//	trawl_calls_total{function, module}
//	trawl_call_errors_total{function, module, errno}
//	trawl_call_duration_seconds{function, module}  (histogram)
//	trawl_functions{backend, state, reason}
//	trawl_dropped_total, trawl_missed_total{kind}
//	trawl_malformed_records_total
//	trawl_build_info{version, kernel}
//
// A function's calls are counted from the moment the trace was armed. The
// module label is "vmlinux" for the kernel itself. Past Options.MaxSeries
// functions, the calls of the functions seen later add up under
// function="_other", module="_other", so that the number of series stays
// bounded with every function attached. Of the functions first seen at the
// same scrape, the busiest take the series left.
package metrics

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
)

// Source is what the collector reads at each scrape: a *trawl.Session of
// an aggregating trace.
type Source interface {
	FunctionStats() ([]call.FunctionStats, error)
	Stats() (trawl.Stats, error)
}

// Options configures a Collector.
type Options struct {
	// MaxSeries bounds the functions with label sets of their own; 0
	// means DefaultMaxSeries.
	MaxSeries int
	// Backend is the name of the backend that attached the functions
	// (trawl.Session.Backend), for trawl_functions.
	Backend string
	// Kernel is the running kernel's release, for trawl_build_info.
	Kernel string
}

// DefaultMaxSeries is the number of functions with series of their own
// when Options.MaxSeries is 0.
const DefaultMaxSeries = 2000

// Other is the function and module label of the calls of the functions
// past Options.MaxSeries.
const Other = "_other"

var (
	callsDesc = prometheus.NewDesc("trawl_calls_total",
		"Calls of the function that ended, or events of the tracepoint (tp:SUBSYSTEM:EVENT), counted in the kernel.", []string{"function", "module"}, nil)
	errorsDesc = prometheus.NewDesc("trawl_call_errors_total",
		"Calls of the function that returned an error, by error name (NULL for a NULL pointer).", []string{"function", "module", "errno"}, nil)
	durationDesc = prometheus.NewDesc("trawl_call_duration_seconds",
		"Duration of the function's calls, from the kernel's log-linear histogram (8 buckets per power of two); none for a tracepoint.", []string{"function", "module"}, nil)
	functionsDesc = prometheus.NewDesc("trawl_functions",
		"Functions selected, by backend, state (attached or skipped) and the reason they were skipped.", []string{"backend", "state", "reason"}, nil)
	droppedDesc = prometheus.NewDesc("trawl_dropped_total",
		"Calls lost because the ring buffer was full (none when only counting).", nil, nil)
	malformedDesc = prometheus.NewDesc("trawl_malformed_records_total",
		"Records from the ring buffer that did not decode, skipped (trawl.Stats.Malformed).", nil, nil)
	missedDesc = prometheus.NewDesc("trawl_missed_total",
		"Calls or events the kernel program missed, by kind.", []string{"kind"}, nil)
	buildDesc = prometheus.NewDesc("trawl_build_info",
		"trawl's version and the kernel it traces; always 1.", []string{"version", "kernel"}, nil)
)

// Collector is a prometheus.Collector of a trace's in-kernel aggregates.
// It is safe for concurrent scrapes.
type Collector struct {
	src    Source
	opts   Options
	folder *Folder
}

// NewCollector returns a Collector of src.
func NewCollector(src Source, opts Options) *Collector {
	return &Collector{src: src, opts: opts, folder: NewFolder(opts.MaxSeries)}
}

// Describe sends the descriptors of the metrics.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{callsDesc, errorsDesc, durationDesc, functionsDesc, droppedDesc, malformedDesc, missedDesc, buildDesc} {
		ch <- d
	}
}

// Collect reads the aggregates from the kernel and sends the metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(buildDesc, prometheus.GaugeValue, 1, trawl.Version().Version, c.opts.Kernel)
	if st, err := c.src.Stats(); err != nil {
		ch <- prometheus.NewInvalidMetric(missedDesc, err)
	} else {
		c.collectStats(ch, st)
	}
	fs, err := c.src.FunctionStats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(callsDesc, err)
		return
	}
	for _, f := range c.folder.Fold(fs) {
		ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.CounterValue, float64(f.Calls), f.Func, f.Module)
		for _, errno := range slices.Sorted(maps.Keys(f.Errnos)) {
			ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(f.Errnos[errno]), f.Func, f.Module, ErrnoLabel(errno))
		}
		if !f.Event {
			ch <- newDuration(f)
		}
	}
}

func (c *Collector) collectStats(ch chan<- prometheus.Metric, st trawl.Stats) {
	ch <- prometheus.MustNewConstMetric(functionsDesc, prometheus.GaugeValue, float64(st.Attached), c.opts.Backend, "attached", "")
	for reason, items := range st.Skipped {
		ch <- prometheus.MustNewConstMetric(functionsDesc, prometheus.GaugeValue, float64(len(items)), c.opts.Backend, "skipped", reason)
	}
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(st.Drops))
	ch <- prometheus.MustNewConstMetric(malformedDesc, prometheus.CounterValue, float64(st.Malformed))
	for _, m := range Missed(st) {
		ch <- prometheus.MustNewConstMetric(missedDesc, prometheus.CounterValue, float64(m.N), m.Kind)
	}
}

// MissedCount is how many calls or events of one kind the kernel program
// missed.
type MissedCount struct {
	Kind string
	N    uint64
}

// Missed returns the counts of trawl_missed_total, by kind, from the
// session's counters.
func Missed(st trawl.Stats) []MissedCount {
	return []MissedCount{
		{"no_task_storage", st.MissStorage}, {"too_deep", st.MissDepth}, {"exit_without_entry", st.MissEntry},
		{"entry_without_exit", st.MissExit}, {"errno_map_full", st.MissErrno}, {"pids_map_full", st.MissPIDs},
		{"figures_not_counted", st.MissFigures}, {"recursion", sum(st.RecursionMisses)},
	}
}

// Folder bounds the functions with series of their own. It is safe for
// concurrent use.
type Folder struct {
	max int
	mu  sync.Mutex
	// own holds the functions with series of their own, in the order
	// they were first seen: a function keeps its series once it has one,
	// and one seen after max others stays in Other, so that every
	// counter only grows.
	own map[seriesKey]bool
}

type seriesKey struct{ function, module string }

// NewFolder returns a Folder that gives at most maxSeries functions
// series of their own; 0 means DefaultMaxSeries.
func NewFolder(maxSeries int) *Folder {
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	return &Folder{max: maxSeries, own: map[seriesKey]bool{}}
}

// Fold returns the functions of fs with series of their own, their
// Module "vmlinux" for the kernel itself, and one more, named Other in
// function and module, adding up the others' calls (if any). It sorts fs.
func (c *Folder) Fold(fs []call.FunctionStats) []call.FunctionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Functions not seen before are taken busiest first, then in name
	// order: the series go to the functions that matter most when the
	// limit is reached, and which ones does not depend on the map order.
	slices.SortStableFunc(fs, func(a, b call.FunctionStats) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Module, b.Module), cmp.Compare(a.Func, b.Func))
	})
	var out []call.FunctionStats
	other := call.FunctionStats{Func: Other, Module: Other, Errnos: map[int]uint64{}}
	folded := false
	for _, f := range fs {
		module := f.Module
		if module == "" {
			module = "vmlinux"
		}
		k := seriesKey{f.Func, module}
		if !c.own[k] && len(c.own) < c.max {
			c.own[k] = true
		}
		if c.own[k] {
			f.Module = module
			out = append(out, f)
			continue
		}
		other.Calls += f.Calls
		other.Errors += f.Errors
		other.Total += f.Total
		for e, n := range f.Errnos {
			other.Errnos[e] += n
		}
		other.Latency.Merge(f.Latency)
		folded = true
	}
	if folded {
		out = append(out, other)
	}
	return out
}

// ErrnoLabel names an errno of call.FunctionStats.Errnos as the errno
// label does: "ENOENT", "NULL" for a NULL pointer (0), "E" and the
// number for one without a name.
func ErrnoLabel(errno int) string {
	if errno == 0 {
		return "NULL"
	}
	if name := trawl.ErrnoName(syscall.Errno(errno)); name != "" {
		return name
	}
	return "E" + strconv.Itoa(errno)
}

// duration is the histogram metric of one function: classic buckets at
// each power of two nanoseconds, and native buckets (schema 3, eight per
// power of two), both made from the kernel's buckets.
type duration struct {
	labels []*dto.LabelPair
	h      dto.Histogram
}

func newDuration(f call.FunctionStats) prometheus.Metric {
	d := &duration{labels: []*dto.LabelPair{
		{Name: proto.String("function"), Value: proto.String(f.Func)},
		{Name: proto.String("module"), Value: proto.String(f.Module)},
	}}
	buckets := f.Latency.Buckets()
	var count uint64
	for _, b := range buckets {
		count += b.Count
	}
	d.h.SampleCount = proto.Uint64(count)
	d.h.SampleSum = proto.Float64(float64(f.Total) / 1e9)
	// Classic: the same bounds at every scrape, 2^k - 1 ns for k up to
	// classicMax, each count exact since the kernel's buckets never
	// straddle a power of two.
	next := 0
	var cum uint64
	for k := 1; k <= classicMax; k++ {
		le := uint64(1)<<k - 1
		for next < len(buckets) && buckets[next].Hi <= le {
			cum += buckets[next].Count
			next++
		}
		d.h.Bucket = append(d.h.Bucket, &dto.Bucket{UpperBound: proto.Float64(float64(le) / 1e9), CumulativeCount: proto.Uint64(cum)})
	}
	// Native, schema 3: bucket i holds (2^((i-1)/8), 2^(i/8)] seconds.
	// Each kernel bucket goes to the native bucket of its middle: its
	// bounds are linear within a power of two, the native ones
	// exponential, so a value moves by at most one bucket (9%).
	var zero uint64
	counts := map[int32]int64{}
	for _, b := range buckets {
		i, ok := NativeIndex(b.Lo, b.Hi)
		if !ok {
			zero += b.Count
			continue
		}
		counts[i] += int64(b.Count)
	}
	d.h.Schema = proto.Int32(3)
	d.h.ZeroThreshold = proto.Float64(0)
	d.h.ZeroCount = proto.Uint64(zero)
	idx := slices.Sorted(maps.Keys(counts))
	var prev int64
	for i, k := range idx {
		if i == 0 || k != idx[i-1]+1 {
			offset := k
			if i > 0 {
				offset = k - idx[i-1] - 1
			}
			d.h.PositiveSpan = append(d.h.PositiveSpan, &dto.BucketSpan{Offset: proto.Int32(offset), Length: proto.Uint32(0)})
		}
		span := d.h.PositiveSpan[len(d.h.PositiveSpan)-1]
		span.Length = proto.Uint32(span.GetLength() + 1)
		d.h.PositiveDelta = append(d.h.PositiveDelta, counts[k]-prev)
		prev = counts[k]
	}
	return d
}

// NativeIndex returns the native histogram bucket (schema 3: bucket i
// holds (2^((i-1)/8), 2^(i/8)] seconds) of the kernel's histogram bucket
// of lo to hi ns: the bucket of its middle. ok is false for the zero
// bucket.
func NativeIndex(lo, hi uint64) (i int32, ok bool) {
	mid := (float64(lo) + float64(hi)) / 2 / 1e9
	if mid <= 0 {
		return 0, false
	}
	return int32(math.Ceil(8 * math.Log2(mid))), true
}

// Desc returns the histogram's descriptor.
func (d *duration) Desc() *prometheus.Desc { return durationDesc }

// Write writes the histogram with its classic and native buckets.
func (d *duration) Write(m *dto.Metric) error {
	m.Label = d.labels
	m.Histogram = &d.h
	return nil
}

// classicMax is the largest power of two of the classic buckets' bounds:
// 2^35 - 1 ns is 34 s, above which the kernel's histogram has no bucket
// of its own.
const classicMax = 35

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
