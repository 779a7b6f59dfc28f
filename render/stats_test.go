// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"github.com/trawl-dev/trawl/render"

	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStatsGolden(t *testing.T) {
	var out bytes.Buffer
	s, err := render.NewStats(&out, render.StatsOptions{SortBy: "p50", Histogram: "tcp_sendmsg"})
	if err != nil {
		t.Fatal(err)
	}
	calls := testCalls(t)
	for i := range 1000 { // a spread of latencies for the histogram
		calls = append(calls, render.Call{Func: "tcp_sendmsg", Duration: uint64(1000 + i*i*10)})
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
