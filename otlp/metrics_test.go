// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/statstest"
)

// TestMetrics exports made-up aggregates to an OTLP receiver over each
// protocol and checks the numbers, labels and histogram buckets, and the
// fold past MaxSeries.
func TestMetrics(t *testing.T) {
	src := &statstest.Source{
		Funcs: []call.FunctionStats{
			statstest.Function("vfs_read", "", 2, 1000, 1000, 3000),
			statstest.Function("b_func", "ext4", 0, 10),
			statstest.Function("c_func", "ext4", 1, 20),
		},
		Totals: trawl.Stats{Attached: 3, Drops: 4, MissExit: 5, Skipped: trawl.Skips{"busy": {"x", "y"}}},
	}
	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			r := &receiver{}
			url := r.startHTTP
			if proto == "grpc" {
				url = r.startGRPC
			}
			m, err := NewMetrics(context.Background(), src, Options{URL: url(t), MaxSeries: 2, Backend: "fentry", Interval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := m.Stats(); st.Exports != 1 || st.Failed != 0 {
				t.Errorf("stats %+v, want one export", st)
			}
			_, reqs := r.received()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			got := map[string]*metricspb.Metric{}
			for _, rm := range reqs[0].ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						got[m.Name] = m
					}
				}
			}
			sums := map[string]int64{}
			for _, name := range []string{"trawl.calls", "trawl.call.errors", "trawl.dropped", "trawl.missed"} {
				if got[name] == nil || got[name].GetSum() == nil || !got[name].GetSum().IsMonotonic {
					t.Fatalf("%s: %v, want a monotonic sum", name, got[name])
				}
				for _, p := range got[name].GetSum().DataPoints {
					sums[name+labels(p.Attributes)] = p.GetAsInt()
				}
			}
			for _, p := range got["trawl.functions"].GetGauge().GetDataPoints() {
				sums["trawl.functions"+labels(p.Attributes)] = p.GetAsInt()
			}
			for key, want := range map[string]int64{
				"trawl.calls{function=b_func,module=ext4}":                         1,
				"trawl.calls{function=vfs_read,module=vmlinux}":                    3,
				"trawl.calls{function=_other,module=_other}":                       1,
				"trawl.call.errors{errno=ENOENT,function=vfs_read,module=vmlinux}": 2,
				"trawl.call.errors{errno=ENOENT,function=_other,module=_other}":    1,
				"trawl.dropped":                                             4,
				"trawl.missed{kind=entry_without_exit}":                     5,
				"trawl.functions{backend=fentry,reason=,state=attached}":    3,
				"trawl.functions{backend=fentry,reason=busy,state=skipped}": 2,
			} {
				if sums[key] != want {
					t.Errorf("%s = %d, want %d", key, sums[key], want)
				}
			}
			h := got["trawl.call.duration"].GetExponentialHistogram()
			if h == nil || got["trawl.call.duration"].Unit != "s" {
				t.Fatalf("trawl.call.duration: %v, want an exponential histogram in seconds", got["trawl.call.duration"])
			}
			for _, p := range h.DataPoints {
				if labels(p.Attributes) != "{function=vfs_read,module=vmlinux}" {
					continue
				}
				// 1000 ns is 2^-19.93 s: bucket 8*-19.93 = -159.4, so
				// index -160; 3000 ns is 2^-18.35 s: index -147.
				var count uint64
				for _, n := range p.Positive.BucketCounts {
					count += n
				}
				if p.Count != 3 || count != 3 || p.GetSum() != 5e-6 || p.Scale != 3 {
					t.Errorf("vfs_read duration: count %d (%d in buckets), sum %g, scale %d; want 3, 5e-6, 3", p.Count, count, p.GetSum(), p.Scale)
				}
				if p.Positive.Offset != -160 || len(p.Positive.BucketCounts) != 14 || p.Positive.BucketCounts[0] != 2 || p.Positive.BucketCounts[13] != 1 {
					t.Errorf("vfs_read buckets: offset %d, counts %v; want 2 at -160 and 1 at -147", p.Positive.Offset, p.Positive.BucketCounts)
				}
			}
		})
	}
}

// labels writes attributes as {k=v,...} in key order, "" when none.
func labels(attrs []*commonpb.KeyValue) string {
	if len(attrs) == 0 {
		return ""
	}
	var kv []string
	for _, a := range attrs {
		kv = append(kv, a.Key+"="+a.Value.GetStringValue())
	}
	slices.Sort(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// TestMetricLabels checks that the metrics' attributes are the names
// package metrics documents, none of which can hold a call's value: the
// aggregates count calls by function, module and error, and never see
// an argument or a return value.
func TestMetricLabels(t *testing.T) {
	src := &statstest.Source{
		Funcs:  []call.FunctionStats{statstest.Function("vfs_write", "", 1, 10), statstest.Function("p9_client_write", "9pnet", 0, 20)},
		Totals: trawl.Stats{Attached: 2, MissExit: 1, Skipped: trawl.Skips{"busy": {"x"}}},
	}
	r := &receiver{}
	m, err := NewMetrics(context.Background(), src, Options{URL: r.startHTTP(t), Backend: "fentry", Interval: time.Hour, Values: ValuesAll})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, reqs := r.received()
	allowed := []string{"function", "module", "errno", "backend", "state", "reason", "kind"}
	points := 0
	for _, req := range reqs {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					var attrs [][]*commonpb.KeyValue
					for _, p := range m.GetSum().GetDataPoints() {
						attrs = append(attrs, p.Attributes)
					}
					for _, p := range m.GetGauge().GetDataPoints() {
						attrs = append(attrs, p.Attributes)
					}
					for _, p := range m.GetExponentialHistogram().GetDataPoints() {
						attrs = append(attrs, p.Attributes)
					}
					for _, list := range attrs {
						points++
						for _, kv := range list {
							if !slices.Contains(allowed, kv.Key) {
								t.Errorf("%s has the attribute %s=%v, want only %v", m.Name, kv.Key, kv.Value, allowed)
							}
						}
					}
				}
			}
		}
	}
	if points < 8 {
		t.Errorf("%d data points, want every metric's", points)
	}
}
