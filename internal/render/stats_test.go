// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStatsGolden(t *testing.T) {
	var out bytes.Buffer
	s, err := NewStats(&out, StatsOptions{SortBy: "p50", Histogram: "tcp_sendmsg"})
	if err != nil {
		t.Fatal(err)
	}
	calls := testCalls(t)
	for i := range 1000 { // a spread of latencies for the histogram
		calls = append(calls, Call{Func: "tcp_sendmsg", Duration: uint64(1000 + i*i*10)})
	}
	render(t, s, calls)
	golden(t, "stats.golden", out.Bytes())
}

func TestStatsBadSort(t *testing.T) {
	if _, err := NewStats(&bytes.Buffer{}, StatsOptions{SortBy: "latency"}); err == nil {
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
	s, err := NewStats(&out, StatsOptions{Interval: time.Millisecond})
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

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for v := uint64(1); v <= 100000; v++ {
		h.Record(v)
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := q * 100000
		got := float64(h.Quantile(q))
		if got < exact || got > exact*1.125 {
			t.Errorf("p%v = %v, want within 12.5%% above %v", q*100, got, exact)
		}
	}
	if h.Max() != 100000 || h.Quantile(1) != 100000 {
		t.Errorf("max %d, p100 %d", h.Max(), h.Quantile(1))
	}
	for _, v := range []uint64{0, 15, 16, 17, 1 << 40, ^uint64(0)} {
		lo, hi := bucketRange(bucket(v))
		if v < lo || v > hi {
			t.Errorf("%d falls in bucket [%d, %d]", v, lo, hi)
		}
	}
}
