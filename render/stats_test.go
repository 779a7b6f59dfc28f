// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

func TestStatsGolden(t *testing.T) {
	var out bytes.Buffer
	s, err := render.NewStats(&out, render.StatsOptions{SortBy: "p50", Histogram: "tcp_sendmsg"})
	if err != nil {
		t.Fatal(err)
	}
	calls := testCalls(t)
	for i := range 1000 { // a spread of latencies for the histogram
		calls = append(calls, call.Call{Func: "tcp_sendmsg", Duration: uint64(1000 + i*i*10)})
	}
	renderAll(t, s, calls)
	golden(t, "stats.golden", out.Bytes())
}

func TestStatsBadSort(t *testing.T) {
	if _, err := render.NewStats(&bytes.Buffer{}, render.StatsOptions{SortBy: "latency"}); err == nil {
		t.Error("unknown sort column accepted")
	}
}

// syncBuffer is a bytes.Buffer safe for the refresh goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestStatsRefresh(t *testing.T) {
	var out syncBuffer
	s, err := render.NewStats(&out, render.StatsOptions{Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	calls := testCalls(t)
	if err := s.Call(&calls[0]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "do_filp_open") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "FUNCTION"); n < 2 {
		t.Errorf("%d tables written, want a refresh and the final one:\n%s", n, out.String())
	}
}

// TestStatsSource: figures counted elsewhere, as the kernel's buckets,
// give the same table as the same calls rendered one by one.
func TestStatsSource(t *testing.T) {
	durations := []uint64{3, 17, 900, 1000, 1500, 40000, 1 << 33}
	var byCall bytes.Buffer
	s, err := render.NewStats(&byCall, render.StatsOptions{Histogram: "vfs_read"})
	if err != nil {
		t.Fatal(err)
	}
	var h call.Histogram
	var total uint64
	for _, d := range durations {
		h.Record(d)
		total += d
		if err := s.Call(&call.Call{Func: "vfs_read", Duration: d}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The kernel's buckets: call.Histogram's layout, one count each.
	counts := make([]uint64, 256)
	for _, d := range durations {
		counts[kernelBucket(d)]++
	}
	var bySource bytes.Buffer
	src := func() ([]call.FunctionStats, error) {
		return []call.FunctionStats{{Func: "vfs_read", Calls: uint64(len(durations)), Total: total, Latency: call.NewHistogram(counts, 1<<33)}}, nil
	}
	s, err = render.NewStats(&bySource, render.StatsOptions{Histogram: "vfs_read", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if bySource.String() != byCall.String() {
		t.Errorf("from the source:\n%s\nfrom the calls:\n%s", bySource.String(), byCall.String())
	}
}

// kernelBucket is hist_bucket of internal/bpf/aggregate.h.
func kernelBucket(ns uint64) int {
	if ns < call.HistogramExact {
		return int(ns)
	}
	e := 0
	for v := ns; v > 1; v >>= 1 {
		e++
	}
	i := call.HistogramExact + (e-4)<<call.HistogramSubBits + int(ns>>(e-call.HistogramSubBits))&(1<<call.HistogramSubBits-1)
	return min(i, 255)
}
