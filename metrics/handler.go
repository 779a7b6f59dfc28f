// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HandlerOptions configures Handler.
type HandlerOptions struct {
	// Health says whether the trace is attached and counting: nil while
	// it is. /healthz answers 200, or 503 with its error.
	Health func() error
	// Pprof serves Go's profiles under /debug/pprof/ (off by default:
	// they show the process's internals to whoever reaches the port).
	Pprof bool
}

// Handler returns an http.Handler that serves the collector's metrics at
// /metrics, in the format the scraper negotiates (native histograms with
// the protobuf format, classic buckets in every format), and the health
// of the trace at /healthz. It serves nothing that changes the trace.
func Handler(c *Collector, opts HandlerOptions) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if opts.Health != nil {
			if err := opts.Health(); err != nil {
				http.Error(w, "not tracing: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	if opts.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}
