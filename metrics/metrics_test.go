// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/statstest"
)

// scrape fetches /metrics as text and parses it.
func scrape(t *testing.T, srv *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// series returns the metric of family name whose labels are labels
// ("k=v,k=v"), or nil.
func series(mfs map[string]*dto.MetricFamily, name, labels string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.Metric {
		var got []string
		for _, l := range m.Label {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if strings.Join(got, ",") == labels {
			return m
		}
	}
	return nil
}

func TestMetrics(t *testing.T) {
	src := &statstest.Source{
		Funcs: []call.FunctionStats{
			statstest.Function("vfs_read", "", 0, 100, 1000, 1500, 1_000_000),
			statstest.Function("do_sys_openat2", "", 2, 5000, 7000),
			statstest.Function("p9_client_read", "9pnet", 0, 3),
		},
		Totals: trawl.Stats{Attached: 3, Drops: 0, MissDepth: 4, Malformed: 2, Skipped: trawl.Skips{"variable arguments": {"printk"}}},
	}
	srv := httptest.NewServer(Handler(NewCollector(src, Options{Backend: "kprobe-session", Kernel: "7.3.4"}), HandlerOptions{}))
	defer srv.Close()
	mfs := scrape(t, srv)

	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"trawl_calls_total", "function=vfs_read,module=vmlinux", 4},
		{"trawl_calls_total", "function=do_sys_openat2,module=vmlinux", 2},
		{"trawl_calls_total", "function=p9_client_read,module=9pnet", 1},
		{"trawl_call_errors_total", "errno=ENOENT,function=do_sys_openat2,module=vmlinux", 2},
		{"trawl_functions", "backend=kprobe-session,reason=,state=attached", 3},
		{"trawl_functions", "backend=kprobe-session,reason=variable arguments,state=skipped", 1},
		{"trawl_missed_total", "kind=too_deep", 4},
		{"trawl_dropped_total", "", 0},
		{"trawl_malformed_records_total", "", 2},
		{"trawl_build_info", "kernel=7.3.4,version=" + trawl.Version().Version, 1},
	} {
		m := series(mfs, c.name, c.labels)
		if m == nil {
			t.Errorf("%s{%s}: missing", c.name, c.labels)
			continue
		}
		var got float64
		switch {
		case m.Counter != nil:
			got = m.Counter.GetValue()
		case m.Gauge != nil:
			got = m.Gauge.GetValue()
		case m.Untyped != nil:
			got = m.Untyped.GetValue()
		}
		if got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	h := series(mfs, "trawl_call_duration_seconds", "function=vfs_read,module=vmlinux").GetHistogram()
	if h.GetSampleCount() != 4 || h.GetSampleSum() != 1_002_600e-9 {
		t.Errorf("vfs_read histogram: %d calls, sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	// Cumulative counts at 2^k - 1 ns: 100 ns is below 127, 1000 and
	// 1500 below 2047, 1 ms below 2^20 - 1.
	for le, want := range map[float64]uint64{63e-9: 0, 127e-9: 1, 1023e-9: 2, 2047e-9: 3, 1048575e-9: 4} {
		found := false
		for _, b := range h.Bucket {
			if b.GetUpperBound() == le {
				found = true
				if b.GetCumulativeCount() != want {
					t.Errorf("vfs_read le=%v: %d, want %d", le, b.GetCumulativeCount(), want)
				}
			}
		}
		if !found {
			t.Errorf("vfs_read: no bucket le=%v", le)
		}
	}
}

// TestLabelsCarryNoValues checks that the metrics' labels are the ones
// the package documents, none of which can hold a call's value: the
// aggregates count calls by function, module and error, and never see an
// argument or a return value.
func TestLabelsCarryNoValues(t *testing.T) {
	src := &statstest.Source{
		Funcs:  []call.FunctionStats{statstest.Function("vfs_write", "", 1, 10), statstest.Function("p9_client_write", "9pnet", 0, 20)},
		Totals: trawl.Stats{Attached: 2, MissExit: 1, Skipped: trawl.Skips{"busy": {"x"}}},
	}
	srv := httptest.NewServer(Handler(NewCollector(src, Options{Backend: "fentry", Kernel: "7.3.4"}), HandlerOptions{}))
	defer srv.Close()
	allowed := []string{"function", "module", "errno", "backend", "state", "reason", "kind", "version", "kernel"}
	series := 0
	for name, mf := range scrape(t, srv) {
		if !strings.HasPrefix(name, "trawl_") {
			continue
		}
		for _, m := range mf.Metric {
			series++
			for _, l := range m.Label {
				if !slices.Contains(allowed, l.GetName()) {
					t.Errorf("%s has the label %s=%q, want only %v", name, l.GetName(), l.GetValue(), allowed)
				}
			}
		}
	}
	if series < 8 {
		t.Errorf("%d series, want every metric's", series)
	}
}

// TestMaxSeries checks the fold into _other: the busiest functions, then
// the first by name, keep their series, the others add up, and a function
// seen later never takes a series of its own, so every counter only grows.
func TestMaxSeries(t *testing.T) {
	src := &statstest.Source{}
	for i := range 4 {
		src.Funcs = append(src.Funcs, statstest.Function(fmt.Sprintf("f%d", i), "", 1, 10, 20))
	}
	src.Funcs = append(src.Funcs, statstest.Function("g", "", 0, 1, 2, 3))
	c := NewCollector(src, Options{MaxSeries: 3})
	srv := httptest.NewServer(Handler(c, HandlerOptions{}))
	defer srv.Close()
	mfs := scrape(t, srv)
	if n := len(mfs["trawl_calls_total"].Metric); n != 4 {
		t.Errorf("%d call series, want 3 and _other", n)
	}
	for _, f := range []string{"g", "f0", "f1"} {
		if series(mfs, "trawl_calls_total", "function="+f+",module=vmlinux") == nil {
			t.Errorf("%s has no series of its own: want the busiest (g), then the first by name", f)
		}
	}
	other := series(mfs, "trawl_calls_total", "function=_other,module=_other")
	if other.GetCounter().GetValue() != 4 {
		t.Errorf("_other: %v calls, want 4 (two functions of two)", other.GetCounter().GetValue())
	}
	if e := series(mfs, "trawl_call_errors_total", "errno=ENOENT,function=_other,module=_other"); e.GetCounter().GetValue() != 2 {
		t.Errorf("_other errors: %v, want 2", e.GetCounter().GetValue())
	}
	if h := series(mfs, "trawl_call_duration_seconds", "function=_other,module=_other").GetHistogram(); h.GetSampleCount() != 4 {
		t.Errorf("_other histogram: %d, want 4", h.GetSampleCount())
	}
	// A new function, first in name order, comes: it goes to _other.
	src.Funcs = append(src.Funcs, statstest.Function("a", "", 0, 5))
	mfs = scrape(t, srv)
	if series(mfs, "trawl_calls_total", "function=a,module=vmlinux") != nil {
		t.Error("a function seen after the limit got a series of its own")
	}
	if got := series(mfs, "trawl_calls_total", "function=_other,module=_other").GetCounter().GetValue(); got != 5 {
		t.Errorf("_other after a new function: %v, want 5", got)
	}
}

// TestNativeHistogram checks that a scraper asking for protobuf gets the
// native buckets too, which add up to the count.
func TestNativeHistogram(t *testing.T) {
	src := &statstest.Source{Funcs: []call.FunctionStats{statstest.Function("f", "", 0, 1, 100, 100, 5000, 1_000_000_000)}}
	srv := httptest.NewServer(Handler(NewCollector(src, Options{}), HandlerOptions{}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			t.Fatal("no trawl_call_duration_seconds")
		} else if err != nil {
			t.Fatal(err)
		}
		if mf.GetName() != "trawl_call_duration_seconds" {
			continue
		}
		h := mf.Metric[0].GetHistogram()
		if h.GetSchema() != 3 {
			t.Errorf("schema %d, want 3", h.GetSchema())
		}
		var n, cur int64
		for _, d := range h.PositiveDelta {
			cur += d
			n += cur
		}
		if uint64(n)+h.GetZeroCount() != 5 || h.GetSampleCount() != 5 {
			t.Errorf("native buckets hold %d (+%d zero), count %d; want 5", n, h.GetZeroCount(), h.GetSampleCount())
		}
		return
	}
}

func TestHealthAndFailure(t *testing.T) {
	src := &statstest.Source{Err: errors.New("session closed")}
	var health error
	srv := httptest.NewServer(Handler(NewCollector(src, Options{}), HandlerOptions{Health: func() error { return health }}))
	defer srv.Close()
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get("/healthz"); s != 200 {
		t.Errorf("/healthz while tracing: %d", s)
	}
	health = errors.New("detached")
	if s := get("/healthz"); s != http.StatusServiceUnavailable {
		t.Errorf("/healthz after the trace: %d", s)
	}
	if s := get("/debug/pprof/"); s != http.StatusNotFound {
		t.Errorf("pprof without asking: %d", s)
	}
	if s := get("/metrics"); s != http.StatusOK {
		t.Errorf("/metrics with the kernel's figures unreadable: %d, want 200 with the rest", s)
	}
	resp, err := http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
}

// TestMetricsTracepoint counts a tracepoint's events, without a duration
// histogram, beside a function's calls.
func TestMetricsTracepoint(t *testing.T) {
	src := &statstest.Source{Funcs: []call.FunctionStats{
		statstest.Function("vfs_read", "", 0, 100),
		{Func: "tp:skb:kfree_skb", Calls: 7, Event: true},
	}}
	srv := httptest.NewServer(Handler(NewCollector(src, Options{}), HandlerOptions{}))
	defer srv.Close()
	mfs := scrape(t, srv)
	if m := series(mfs, "trawl_calls_total", "function=tp:skb:kfree_skb,module=vmlinux"); m == nil || m.GetCounter().GetValue() != 7 {
		t.Errorf("trawl_calls_total of the tracepoint: %v, want 7", m)
	}
	if m := series(mfs, "trawl_call_duration_seconds", "function=tp:skb:kfree_skb,module=vmlinux"); m != nil {
		t.Errorf("a duration histogram for a tracepoint: %v", m)
	}
	if m := series(mfs, "trawl_call_duration_seconds", "function=vfs_read,module=vmlinux"); m == nil {
		t.Error("no duration histogram for vfs_read")
	}
}
