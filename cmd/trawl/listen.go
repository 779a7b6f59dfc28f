// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/metrics"
)

// listenMetrics opens the --listen address, before anything is traced so
// that a port in use is refused first. A bare ":PORT" binds 127.0.0.1:
// the metrics name the kernel's functions, which not everyone on the
// network should read.
func listenMetrics(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr) // checked with the flags
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	return ln, nil
}

// serveMetrics serves the metrics of s on ln, healthy until stopped says
// the trace stopped; the function it returns shuts the server down.
func serveMetrics(ln net.Listener, s *trawl.Session, f *traceFlags, stopped func() bool, notices io.Writer) func() {
	var uts unix.Utsname
	unix.Uname(&uts)
	c := metrics.NewCollector(s, metrics.Options{MaxSeries: f.maxSeries, Backend: string(s.Backend), Kernel: unix.ByteSliceToString(uts.Release[:])})
	srv := &http.Server{
		Handler: metrics.Handler(c, metrics.HandlerOptions{Pprof: f.pprof, Health: func() error {
			if stopped() {
				return errors.New("the trace stopped")
			}
			return nil
		}}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if os.Getenv("GOGC") == "" {
		// A trace of every function holds about 80 MB of plans and types
		// for as long as it serves, and a scrape allocates little: a heap
		// at most half again its live size, not twice, keeps the service
		// within 200 MB (amd64-7.3, 47400 functions: 190 MB before).
		debug.SetGCPercent(50)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(notices, "trawl: --listen: %v\n", err)
		}
	}()
	fmt.Fprintf(notices, "trawl: serving metrics at http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}
}
