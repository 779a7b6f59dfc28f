// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/otlp"
	"github.com/trawl-dev/trawl/render"
)

// otlpStopTime bounds the last export after an interrupt, so that Ctrl-C
// still stops trawl within a second; after a trace that ended by itself
// the export has otlp.DefaultTimeout.
const otlpStopTime = 200 * time.Millisecond

// otlpOutput is the renderer of a run with --otlp: it writes the calls
// with the format's renderer, if any, and exports each as a span
// (traces), or, with --stats, exports the kernel's counts (metrics).
type otlpOutput struct {
	inner   render.Renderer // nil: the calls are only exported
	traces  *otlp.Traces
	metrics *otlp.Metrics
	ctx     context.Context
}

// wrapOTLP adds the --otlp export to r (nil: no output of its own).
func (f *traceFlags) wrapOTLP(ctx context.Context, r render.Renderer, s *trawl.Session, wall int64, notices io.Writer) (render.Renderer, error) {
	quietOTel()
	opts := otlp.Options{URL: f.otlp, WallOffset: wall, MaxSeries: f.maxSeries, Backend: string(s.Backend), Interval: f.interval,
		Values: otlp.Values(f.otlpValues), AttributeLimit: f.otlpLimit}
	o := &otlpOutput{inner: r, ctx: ctx}
	var err error
	if f.aggregate() {
		if o.metrics, err = otlp.NewMetrics(ctx, s, opts); err != nil {
			return nil, fmt.Errorf("--otlp: %w", err)
		}
		every := f.interval
		if every == 0 {
			every = otlp.DefaultMetricInterval
		}
		fmt.Fprintf(notices, "trawl: exporting the counts as metrics to %s every %v\n", f.otlp, every)
		return o, nil
	}
	opts.Interval = 0
	if o.traces, err = otlp.NewTraces(ctx, opts); err != nil {
		return nil, fmt.Errorf("--otlp: %w", err)
	}
	if r == nil {
		fmt.Fprintf(notices, "trawl: exporting each call as a span to %s (and writing none: add -f FORMAT or -o FILE for that)\n", f.otlp)
	} else {
		fmt.Fprintf(notices, "trawl: exporting each call as a span to %s\n", f.otlp)
	}
	return o, nil
}

// resolveTime bounds the lookup of the collector's name for the warning
// of warnInsecure.
const resolveTime = 2 * time.Second

// warnInsecure warns, in one line on w, when exporting to url carries
// the trace in the clear to another machine.
func warnInsecure(ctx context.Context, w io.Writer, url string) {
	ctx, cancel := context.WithTimeout(ctx, resolveTime)
	defer cancel()
	if otlp.InsecureRemote(ctx, url) {
		fmt.Fprintf(w, "trawl: warning: --otlp %s sends the trace unencrypted to another machine, where anyone on the way can read it: use https:// or grpcs://\n", url)
	}
}

// quietOTel sends OpenTelemetry's own diagnostics to log/slog at debug
// level (shown with --debug): what the exporters fail to send is counted
// and shown in the summary instead.
func quietOTel() {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { slog.Debug("otlp", "err", err) }))
	if slog.Default().Enabled(context.Background(), slog.LevelDebug) {
		otel.SetLogger(logr.FromSlogHandler(slog.Default().Handler()))
	} else {
		otel.SetLogger(logr.Discard())
	}
}

// Call writes c and exports it as a span.
func (o *otlpOutput) Call(c *call.Call) error {
	if o.inner != nil {
		if err := o.inner.Call(c); err != nil {
			return err
		}
	}
	if o.traces != nil {
		return o.traces.Call(c)
	}
	return nil
}

// Flush flushes the output; the exporters send on their own.
func (o *otlpOutput) Flush() error {
	if o.inner != nil {
		return o.inner.Flush()
	}
	return nil
}

// Close closes the output, then sends what is left to export, for at most
// otlpStopTime after an interrupt.
func (o *otlpOutput) Close() error {
	var err error
	if o.inner != nil {
		err = o.inner.Close()
	}
	timeout := otlp.DefaultTimeout
	if signalOf(o.ctx) != 0 {
		timeout = otlpStopTime
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Export failures are counted and shown by summary.
	start := time.Now()
	if o.traces != nil {
		o.traces.Shutdown(ctx)
	}
	if o.metrics != nil {
		o.metrics.Shutdown(ctx)
	}
	slog.Debug("otlp: last export", "took", time.Since(start), "limit", timeout)
	return err
}

// summary says what became of the export, under the trace's summary.
func (o *otlpOutput) summary(w io.Writer) {
	if o.traces != nil {
		st := o.traces.Stats()
		fmt.Fprintf(w, "trawl: otlp: %d spans: %d exported, %d dropped (export queue full, or an event whose call never ended), %d not exported (export failed or cut short)", st.Spans, st.Exported, st.Dropped, st.Failed)
		if st.Err != nil {
			fmt.Fprintf(w, ": %s", oneLine(st.Err.Error()))
		}
		fmt.Fprintln(w)
		if st.Cut > 0 {
			fmt.Fprintf(w, "trawl: otlp: %d values cut short, ending in \"...\" (see --otlp-values and --otlp-attribute-limit)\n", st.Cut)
		}
	}
	if o.metrics != nil {
		st := o.metrics.Stats()
		fmt.Fprintf(w, "trawl: otlp: metrics exported %d times, %d failed", st.Exports, st.Failed)
		if st.Err != nil {
			fmt.Fprintf(w, ": %s", oneLine(st.Err.Error()))
		}
		fmt.Fprintln(w)
	}
}
