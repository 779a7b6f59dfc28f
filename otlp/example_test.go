// SPDX-License-Identifier: Apache-2.0

package otlp_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/otlp"
)

// Export every do_sys_openat2 call for ten seconds as a span to a
// collector on this machine, and say what became of the spans. Tracing
// needs root, or CAP_BPF and CAP_PERFMON.
func ExampleNewTraces() {
	ctx := context.Background()
	s, err := trawl.Open(ctx, trawl.Config{Patterns: []string{"do_sys_openat2"}})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	spans, err := otlp.NewTraces(ctx, otlp.Options{URL: "grpc://127.0.0.1:4317"})
	if err != nil {
		log.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(10 * time.Second))
	var c trawl.Call
	for s.Read(ctx, &c) == nil {
		spans.Call(&c)
	}
	shutdown, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	spans.Shutdown(shutdown)
	st := spans.Stats()
	fmt.Printf("%d spans: %d exported, %d dropped, %d not exported (%v)\n", st.Spans, st.Exported, st.Dropped, st.Failed, st.Err)
}

// Export the counts of an aggregating trace as metrics every 10 seconds
// until ctx is done, then once more.
func ExampleNewMetrics() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	s, err := trawl.Open(ctx, trawl.Config{Patterns: []string{"vfs_*"}, Aggregate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := otlp.NewMetrics(ctx, s, otlp.Options{URL: "http://127.0.0.1:4318", Backend: string(s.Backend)})
	if err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Print(err)
	}
	fmt.Printf("%+v\n", m.Stats())
}
