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
//	trawl.kind        "tracepoint" for a tracepoint's event; absent for a call
//
// and the resource attributes service.name (trawl), service.version
// (trawl's version), host.name and os.version (the kernel's release). A
// call's span is the child of its caller's span: the call of the same
// task in progress when it started (as render.Tree shows it), and each
// outermost call starts a trace of its own. A tracepoint's event is a
// span event of the span of the call it happened in, named after the
// tracepoint, at its time, with the attributes of a span; an event
// outside any traced call is a span of its own, without duration. Integers, booleans and floats
// are attributes of their type; strings, enumerator names, pointers
// ("sym+0x10", "0xffff...") and raw bytes (hex) are strings; NULL
// pointers are "NULL", values not captured "?"; structs and arrays are
// strings of their JSON text as render.JSON writes it.
//
// Which of the values of arguments, --show expressions and returns a
// span carries is Options.Values's choice: by default (ValuesNames)
// numbers and names but no buffer, struct or kernel address, and strings
// cut to NamesStringLimit bytes; see Values. Every string attribute is
// cut to Options.AttributeLimit bytes. A value cut ends in "..." and is
// counted (TraceStats.Cut). InsecureRemote says whether an endpoint
// would carry them in the clear to another machine.
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
	"net/netip"
	"net/url"
	"os"
	"slices"
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
	// Values says which values of a call's arguments, --show
	// expressions and return its span carries: ValuesNone, ValuesNames
	// or ValuesAll (see Values); "" means ValuesNames. Metrics carry no
	// values at any level.
	Values Values
	// AttributeLimit bounds the bytes of each string attribute of a span
	// (and of each frame of trawl.stack): a longer string is cut at a
	// character boundary and ends in "...", AttributeLimit bytes in all,
	// and counted (TraceStats.Cut). 0 means DefaultAttributeLimit; else
	// it is at least MinAttributeLimit.
	AttributeLimit int
}

// Defaults of Options.
const (
	DefaultQueueSize      = 8192
	DefaultBatchSize      = 512
	DefaultTimeout        = 5 * time.Second
	DefaultInterval       = time.Second
	DefaultMetricInterval = 10 * time.Second
	// DefaultAttributeLimit bounds each value at 1 KiB, room for the hex
	// of a buffer of 64 bytes (--max-bytes' default) and a struct of
	// dozens of members (ValuesAll).
	DefaultAttributeLimit = 1024
)

// MinAttributeLimit is the least Options.AttributeLimit: room for a few
// characters and the "..." of a cut.
const MinAttributeLimit = 16

// NamesStringLimit is the most bytes of a string value ValuesNames sends:
// a longer one is cut, its first bytes and "...", 64 bytes in all.
const NamesStringLimit = 64

// Values is a level of the values a span carries (Options.Values, the
// command's --otlp-values), from the least sent:
//
//   - ValuesNone: no value of an argument, a --show expression or the
//     return (no trawl.arg, trawl.show or trawl.ret attribute).
//   - ValuesNames, the default: integers, floats, booleans and returned
//     errors; enumerator names ("O_RDONLY|O_CLOEXEC"); NULL, and a
//     pointer into a kernel symbol as "sym+0x10"; "?" for a value not
//     captured; strings (NUL-terminated: file names, socket addresses,
//     --show's str()) cut to NamesStringLimit bytes. Not sent: sized
//     buffers (call.Buffer: the bytes a write or read carried, text or
//     not) and other raw bytes, structs and arrays, and pointers outside
//     a symbol, whose kernel addresses would undo KASLR.
//   - ValuesAll: every value, buffers, structs and addresses included.
//
// A value a level does not send has no attribute. At every level a span
// keeps its name (the function), times, task (thread.id, process.pid,
// process.command), trawl.errno and the error status, trawl.module,
// trawl.cpu, trawl.chain, trawl.flags and trawl.stack (symbols and
// offsets), and every string attribute is cut to Options.AttributeLimit.
type Values string

// The levels of Values.
const (
	// ValuesNone sends no value of an argument, a --show expression or a
	// return: no trawl.arg, trawl.show or trawl.ret attribute.
	ValuesNone Values = "none"
	// ValuesNames sends numbers, names and strings cut short, but no
	// buffer, raw memory, struct, array or kernel address.
	ValuesNames Values = "names"
	// ValuesAll sends every value, as the package documentation maps it.
	ValuesAll Values = "all"
)

// ValueLevels are the levels of Values, from the least sent.
var ValueLevels = []Values{ValuesNone, ValuesNames, ValuesAll}

// ErrBadOptions is returned for Options whose Values or AttributeLimit
// has no meaning.
var ErrBadOptions = errors.New("bad OTLP options")

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

// InsecureRemote reports whether exporting to the URL u would carry the
// trace in the clear (http:// or grpc://) to another machine: to a host
// that is not localhost, not a loopback address (127.0.0.0/8, ::1), and
// not a name that resolves, within ctx, to loopback addresses only. A
// name that does not resolve counts as another machine; a URL CheckURL
// refuses is never reported.
func InsecureRemote(ctx context.Context, u string) bool {
	e, err := parseURL(u)
	if err != nil || e.secure {
		return false
	}
	host, _, _ := net.SplitHostPort(e.host)
	return !loopback(ctx, host, net.DefaultResolver.LookupNetIP)
}

// loopback says whether host names this machine through its loopback
// interface, resolving a name with lookup.
func loopback(ctx context.Context, host string, lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)) bool {
	// An empty host dials the local system.
	if host == "" || strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().IsLoopback()
	}
	addrs, err := lookup(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return false
		}
	}
	return true
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

// check says why the options of spans cannot be used, or returns nil.
func (o Options) check() error {
	if o.Values != "" && !slices.Contains(ValueLevels, o.Values) {
		return fmt.Errorf("%w: Values %q: want %s, %s or %s", ErrBadOptions, o.Values, ValuesNone, ValuesNames, ValuesAll)
	}
	if o.AttributeLimit != 0 && o.AttributeLimit < MinAttributeLimit {
		return fmt.Errorf("%w: AttributeLimit %d: want at least %d bytes (or 0, %d)", ErrBadOptions, o.AttributeLimit, MinAttributeLimit, DefaultAttributeLimit)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Values == "" {
		o.Values = ValuesNames
	}
	if o.AttributeLimit == 0 {
		o.AttributeLimit = DefaultAttributeLimit
	}
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
