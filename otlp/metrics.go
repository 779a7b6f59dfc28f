// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/metrics"
)

// MetricStats count the exports of Metrics.
type MetricStats struct {
	// Exports counts the collections the collector took, Failed those
	// whose export failed.
	Exports, Failed uint64
	// Err is the last export error, nil if none failed.
	Err error
}

// Metrics exports the in-kernel aggregates of a trace every
// Options.Interval, read from the kernel at each export, and once more
// at Shutdown.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	exp      *countingExporter
}

// NewMetrics returns a Metrics exporting what src counts (a
// *trawl.Session of an aggregating trace) to the collector at opts.URL.
func NewMetrics(ctx context.Context, src metrics.Source, opts Options) (*Metrics, error) {
	e, err := parseURL(opts.URL)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	var exp sdkmetric.Exporter
	if e.grpc {
		o := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(e.host), otlpmetricgrpc.WithTimeout(opts.Timeout),
			otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false})}
		if !e.secure {
			o = append(o, otlpmetricgrpc.WithInsecure())
		}
		exp, err = otlpmetricgrpc.New(ctx, o...)
	} else {
		o := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(e.host), otlpmetrichttp.WithURLPath(e.prefix + "/v1/metrics"),
			otlpmetrichttp.WithTimeout(opts.Timeout), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false})}
		if !e.secure {
			o = append(o, otlpmetrichttp.WithInsecure())
		}
		exp, err = otlpmetrichttp.New(ctx, o...)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter for %s: %w", opts.URL, err)
	}
	return NewMetricsTo(exp, src, opts), nil
}

// NewMetricsTo returns a Metrics exporting with exp (opts.URL unused).
func NewMetricsTo(exp sdkmetric.Exporter, src metrics.Source, opts Options) *Metrics {
	opts = opts.withDefaults()
	interval := opts.Interval
	if interval <= 0 {
		interval = DefaultMetricInterval
	}
	ce := &countingExporter{Exporter: exp}
	p := &producer{src: src, folder: metrics.NewFolder(opts.MaxSeries), backend: opts.Backend, start: time.Now()}
	reader := sdkmetric.NewPeriodicReader(ce, sdkmetric.WithInterval(interval), sdkmetric.WithTimeout(opts.Timeout), sdkmetric.WithProducer(p))
	return &Metrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithResource(newResource(opts.Kernel)), sdkmetric.WithReader(reader)),
		exp:      ce,
	}
}

// Shutdown exports the aggregates once more and shuts the exporter down,
// returning once ctx is done at the latest.
func (m *Metrics) Shutdown(ctx context.Context) error {
	return m.provider.Shutdown(ctx)
}

// Stats returns how the exports went so far.
func (m *Metrics) Stats() MetricStats {
	m.exp.mu.Lock()
	defer m.exp.mu.Unlock()
	return m.exp.stats
}

// countingExporter counts the exports and their failures.
type countingExporter struct {
	sdkmetric.Exporter
	mu    sync.Mutex
	stats MetricStats
}

func (e *countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := e.Exporter.Export(ctx, rm)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.stats.Failed++
		e.stats.Err = err
		return err
	}
	e.stats.Exports++
	return nil
}

// producer reads the aggregates from the kernel at each collection.
type producer struct {
	src     metrics.Source
	folder  *metrics.Folder
	backend string
	start   time.Time
}

func (p *producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := time.Now()
	var out []metricdata.Metrics
	st, statsErr := p.src.Stats()
	if statsErr == nil {
		out = append(out, p.stats(st, now)...)
	}
	fs, fsErr := p.src.FunctionStats()
	if fsErr == nil {
		out = append(out, p.functions(p.folder.Fold(fs), now)...)
	}
	if err := errors.Join(statsErr, fsErr); err != nil {
		err = fmt.Errorf("read the counts from the kernel: %w", err)
		if len(out) == 0 {
			return nil, err
		}
		return p.scope(out), err
	}
	return p.scope(out), nil
}

func (p *producer) scope(m []metricdata.Metrics) []metricdata.ScopeMetrics {
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: scope, Version: trawl.Version().Version}, Metrics: m}}
}

// sum is a cumulative monotonic counter of points.
func (p *producer) sum(name, unit, desc string, points []metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Name: name, Unit: unit, Description: desc, Data: metricdata.Sum[int64]{
		DataPoints: points, Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
	}}
}

func (p *producer) point(now time.Time, n uint64, attrs ...attribute.KeyValue) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attrs...), StartTime: p.start, Time: now, Value: int64(n)}
}

// stats makes the metrics of the session's counters.
func (p *producer) stats(st trawl.Stats, now time.Time) []metricdata.Metrics {
	functions := []metricdata.DataPoint[int64]{{
		Attributes: attribute.NewSet(attribute.String("backend", p.backend), attribute.String("state", "attached"), attribute.String("reason", "")),
		Time:       now, Value: int64(st.Attached),
	}}
	for _, reason := range slices.Sorted(maps.Keys(st.Skipped)) {
		functions = append(functions, metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(attribute.String("backend", p.backend), attribute.String("state", "skipped"), attribute.String("reason", reason)),
			Time:       now, Value: int64(len(st.Skipped[reason])),
		})
	}
	var missed []metricdata.DataPoint[int64]
	for _, m := range metrics.Missed(st) {
		missed = append(missed, p.point(now, m.N, attribute.String("kind", m.Kind)))
	}
	return []metricdata.Metrics{
		{Name: "trawl.functions", Unit: "{function}", Description: "Functions selected, by backend, state (attached or skipped) and the reason they were skipped.",
			Data: metricdata.Gauge[int64]{DataPoints: functions}},
		p.sum("trawl.dropped", "{call}", "Calls lost because the ring buffer was full (none when only counting).", []metricdata.DataPoint[int64]{p.point(now, st.Drops)}),
		p.sum("trawl.missed", "{event}", "Calls or events the kernel program missed, by kind.", missed),
	}
}

// functions makes the per-function metrics.
func (p *producer) functions(fs []call.FunctionStats, now time.Time) []metricdata.Metrics {
	var calls, errs []metricdata.DataPoint[int64]
	var durations []metricdata.ExponentialHistogramDataPoint[float64]
	for _, f := range fs {
		fn, mod := attribute.String("function", f.Func), attribute.String("module", f.Module)
		calls = append(calls, p.point(now, f.Calls, fn, mod))
		for _, errno := range slices.Sorted(maps.Keys(f.Errnos)) {
			errs = append(errs, p.point(now, f.Errnos[errno], fn, mod, attribute.String("errno", metrics.ErrnoLabel(errno))))
		}
		if !f.Event {
			durations = append(durations, p.duration(f, now, fn, mod))
		}
	}
	return []metricdata.Metrics{
		p.sum("trawl.calls", "{call}", "Calls of the function that ended, counted in the kernel.", calls),
		p.sum("trawl.call.errors", "{call}", "Calls of the function that returned an error, by error name (NULL for a NULL pointer).", errs),
		{Name: "trawl.call.duration", Unit: "s", Description: "Duration of the function's calls, from the kernel's log-linear histogram (8 buckets per power of two).",
			Data: metricdata.ExponentialHistogram[float64]{DataPoints: durations, Temporality: metricdata.CumulativeTemporality}},
	}
}

// duration makes the exponential histogram, scale 3, of one function:
// OTLP's bucket i holds (2^(i/8), 2^((i+1)/8)] seconds, the native bucket
// i+1 of package metrics.
func (p *producer) duration(f call.FunctionStats, now time.Time, attrs ...attribute.KeyValue) metricdata.ExponentialHistogramDataPoint[float64] {
	d := metricdata.ExponentialHistogramDataPoint[float64]{
		Attributes: attribute.NewSet(attrs...), StartTime: p.start, Time: now,
		Sum: float64(f.Total) / 1e9, Scale: 3,
	}
	counts := map[int32]uint64{}
	for _, b := range f.Latency.Buckets() {
		d.Count += b.Count
		i, ok := metrics.NativeIndex(b.Lo, b.Hi)
		if !ok {
			d.ZeroCount += b.Count
			continue
		}
		counts[i-1] += b.Count
	}
	if len(counts) > 0 {
		lo, hi := int32(1<<31-1), int32(-1<<31)
		for i := range counts {
			lo, hi = min(lo, i), max(hi, i)
		}
		d.PositiveBucket.Offset = lo
		d.PositiveBucket.Counts = make([]uint64, hi-lo+1)
		for i, n := range counts {
			d.PositiveBucket.Counts[i-lo] = n
		}
	}
	return d
}
