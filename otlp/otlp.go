// SPDX-License-Identifier: Apache-2.0

// Package otlp exports a trace to an OpenTelemetry collector over OTLP
// (gRPC or HTTP/protobuf), with go.opentelemetry.io/otel's exporters.
//
// Traces, a render.Renderer, makes each call a span: named after the
// function, from the call's start to its end (the kernel's timestamps in
// wall-clock time), with the attributes
//
//	trawl.arg.NAME    each argument's decoded value (see below)
//	trawl.show.EXPR   each --show value (trawl.Config.Show)
//	trawl.ret         the return value; trawl.errno its error name ("ENOENT")
//	trawl.module      the kernel module; absent for vmlinux
//	trawl.cpu, trawl.chain, trawl.flags ("entry_only", "exit_only", "missed", "origin"), trawl.stack
//	thread.id, process.pid, process.command
//
// and the resource attributes service.name (trawl), service.version
// (trawl's version), host.name and os.version (the kernel's release). A
// call's span is the child of its caller's span: the call of the same
// task in progress when it started (as render.Tree shows it), and each
// outermost call starts a trace of its own. Integers, booleans and floats
// are attributes of their type; strings, enumerator names, pointers
// ("sym+0x10", "0xffff...") and raw bytes (hex) are strings; NULL
// pointers are "NULL", values not captured "?"; structs and arrays are
// strings of their JSON text as render.JSON writes it.
//
// Metrics exports what an aggregating trace (trawl.Config.Aggregate)
// counts in the kernel, with the names and numbers of package metrics
// (OTLP's names, which a collector's Prometheus exporter turns into
// those of package metrics): trawl.calls, trawl.call.errors,
// trawl.call.duration (an exponential histogram of scale 3, the native
// histogram of package metrics), trawl.functions, trawl.dropped and
// trawl.missed.
//
// Spans go out in batches behind a bounded queue: when the collector is
// down or slow, the queue fills and the spans that do not fit are
// dropped and counted (TraceStats), never waited for, so that tracing
// neither stalls nor grows without bound.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
)

// Options configure an exporter.
type Options struct {
	// URL is the collector's OTLP endpoint: grpc://HOST:PORT (gRPC
	// without TLS), grpcs://HOST:PORT (gRPC over TLS), or
	// http://HOST:PORT[/PREFIX] and https://... (HTTP/protobuf, to
	// PREFIX/v1/traces and PREFIX/v1/metrics).
	URL string
	// QueueSize bounds the calls waiting to be made spans and sent; those
	// that find it full are dropped. 0 means DefaultQueueSize.
	QueueSize int
	// BatchSize is the most spans sent in one request; 0 means
	// DefaultBatchSize.
	BatchSize int
	// Timeout bounds each export request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Interval is the longest a span waits in the queue before it is
	// sent, and how often Metrics exports; 0 means DefaultInterval for
	// spans, DefaultMetricInterval for metrics.
	Interval time.Duration
	// WallOffset is added to a call's TS (CLOCK_MONOTONIC) to give Unix
	// time in ns (render.WallOffset); 0 means it is read when the
	// exporter is made.
	WallOffset int64
	// Kernel is the kernel's release for os.version; "" means the
	// running kernel's.
	Kernel string
	// MaxSeries bounds the functions with series of their own in
	// Metrics, as in package metrics; 0 means metrics.DefaultMaxSeries.
	MaxSeries int
	// Backend is the backend that attached the functions, for the
	// trawl.functions metric.
	Backend string
}

// Defaults of Options.
const (
	DefaultQueueSize      = 8192
	DefaultBatchSize      = 512
	DefaultTimeout        = 5 * time.Second
	DefaultInterval       = time.Second
	DefaultMetricInterval = 10 * time.Second
)

// ErrBadURL is returned for an Options.URL that names no OTLP endpoint.
var ErrBadURL = errors.New("bad OTLP URL")

// endpoint is a parsed Options.URL.
type endpoint struct {
	grpc   bool
	secure bool
	host   string // HOST:PORT
	prefix string // HTTP path prefix, without a trailing slash
}

// CheckURL says why u cannot be an Options.URL, or returns nil.
func CheckURL(u string) error {
	_, err := parseURL(u)
	return err
}

func parseURL(s string) (endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return endpoint{}, fmt.Errorf("%w %q: %w", ErrBadURL, s, err)
	}
	var e endpoint
	switch u.Scheme {
	case "grpc":
		e.grpc = true
	case "grpcs":
		e.grpc, e.secure = true, true
	case "http":
	case "https":
		e.secure = true
	default:
		return endpoint{}, fmt.Errorf("%w %q: want grpc://HOST:PORT, grpcs://HOST:PORT, http://HOST:PORT or https://HOST:PORT", ErrBadURL, s)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return endpoint{}, fmt.Errorf("%w %q: name the collector's HOST:PORT (OTLP listens on 4317 for gRPC, 4318 for HTTP)", ErrBadURL, s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return endpoint{}, fmt.Errorf("%w %q: no user, query or fragment", ErrBadURL, s)
	}
	if e.grpc && strings.Trim(u.Path, "/") != "" {
		return endpoint{}, fmt.Errorf("%w %q: a gRPC endpoint has no path", ErrBadURL, s)
	}
	e.host, e.prefix = u.Host, strings.TrimSuffix(u.Path, "/")
	return e, nil
}

func (o Options) withDefaults() Options {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	o.BatchSize = min(o.BatchSize, o.QueueSize)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Kernel == "" {
		var uts unix.Utsname
		if unix.Uname(&uts) == nil {
			o.Kernel = unix.ByteSliceToString(uts.Release[:])
		}
	}
	return o
}

// newResource describes the process that exports: trawl, its version,
// the host and the kernel.
func newResource(kernel string) *resource.Resource {
	host, _ := os.Hostname()
	return resource.NewSchemaless(
		attribute.String("service.name", "trawl"),
		attribute.String("service.version", trawl.Version().Version),
		attribute.String("host.name", host),
		attribute.String("os.type", "linux"),
		attribute.String("os.version", kernel),
	)
}

// shutdownContext is the context of a final export: ctx, bounded by
// timeout unless ctx has an earlier deadline.
func shutdownContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}
