// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// requireCollector returns the guest's OpenTelemetry Collector, skipping
// the test on every guest but guest.SpareAmd64 (internal/vmtest/suite shares
// the collector with that one): building one takes minutes an
// architecture on a fresh machine, and starting one minutes under
// emulation, which the suite's CI budget does not have twice over.
func requireCollector(t *testing.T) string {
	t.Helper()
	guest.Require(t)
	if k := guest.Kernel(); k != guest.SpareAmd64 {
		t.Skipf("an OpenTelemetry Collector runs on %s only, to keep make test within the CI budget; this is %s", guest.SpareAmd64, k)
	}
	bin, err := guest.Otelcol()
	if err != nil {
		t.Skip(err)
	}
	return bin
}

// startCollector runs the collector with an OTLP receiver on a gRPC and
// an HTTP address, writing what it receives to out as JSON lines, until
// the test ends; it returns the two addresses once they take connections.
func startCollector(t *testing.T, bin, out string) (grpcAddr, httpAddr string) {
	grpcAddr, httpAddr = freeAddr(t), freeAddr(t)
	config := filepath.Join(t.TempDir(), "otelcol.yaml")
	yaml := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
    metrics:
      receivers: [otlp]
      exporters: [file]
`, grpcAddr, httpAddr, out)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	col := exec.Command(bin, "--config", config)
	var colOut syncBuffer
	col.Stdout, col.Stderr = &colOut, &colOut
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		col.Process.Kill()
		col.Wait()
		if t.Failed() {
			t.Logf("collector:\n%s", colOut.String())
		}
	})
	deadline := time.Now().Add(startLimit)
	for _, addr := range []string{grpcAddr, httpAddr} {
		for {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the collector does not listen on %s after %v\n%s", addr, startLimit, colOut.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return grpcAddr, httpAddr
}

// spanCall is a call of trawl --json, the fields the OTLP tests compare.
type spanCall struct {
	Time     time.Time                  `json:"time"`
	PID      uint32                     `json:"pid"`
	TID      uint32                     `json:"tid"`
	Comm     string                     `json:"comm"`
	Func     string                     `json:"func"`
	Args     map[string]json.RawMessage `json:"args"`
	Ret      json.RawMessage            `json:"ret"`
	Errno    string                     `json:"errno"`
	Duration int64                      `json:"duration_ns"`
	Depth    int                        `json:"depth"`
	Flags    []string                   `json:"flags"`
}

func (c *spanCall) start() int64 { return c.Time.UnixNano() }
func (c *spanCall) end() int64   { return c.Time.UnixNano() + c.Duration }

// otlpSpan is a span as the collector's file exporter writes it (OTLP's
// JSON encoding).
type otlpSpan struct {
	TraceID    string     `json:"traceId"`
	SpanID     string     `json:"spanId"`
	Parent     string     `json:"parentSpanId"`
	Name       string     `json:"name"`
	Start      int64      `json:"startTimeUnixNano,string"`
	End        int64      `json:"endTimeUnixNano,string"`
	Attributes []otlpAttr `json:"attributes"`
	resource   map[string]string
}

type otlpAttr struct {
	Key   string `json:"key"`
	Value struct {
		String *string          `json:"stringValue"`
		Int    *string          `json:"intValue"`
		Bool   *bool            `json:"boolValue"`
		Double *float64         `json:"doubleValue"`
		Array  *json.RawMessage `json:"arrayValue"`
	} `json:"value"`
}

// matches says whether the attribute holds the value whose JSON text
// trawl --json wrote, the way package otlp maps values.
func (a *otlpAttr) matches(raw json.RawMessage) bool {
	v, text := a.Value, string(raw)
	switch {
	case v.Int != nil:
		return *v.Int == text
	case v.Bool != nil:
		return strconv.FormatBool(*v.Bool) == text
	case v.Double != nil:
		f, err := strconv.ParseFloat(text, 64)
		return err == nil && f == *v.Double
	case v.String == nil:
		return false
	}
	switch str := *v.String; {
	case text == "null":
		return str == "NULL" || str == "?"
	case strings.HasPrefix(text, `"`):
		var want string
		return json.Unmarshal(raw, &want) == nil && str == want
	default: // structs and arrays as their JSON, numbers beyond int64 in decimal
		return str == text
	}
}

// String gives the attribute's value for messages.
func (a otlpAttr) String() string {
	b, _ := json.Marshal(a.Value)
	return string(b)
}

// readSpans reads the spans of the collector's file.
func readSpans(t *testing.T, path string) []*otlpSpan {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var spans []*otlpSpan
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var req struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpAttr `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []*otlpSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			t.Fatalf("collector output: %v\n%s", err, sc.Bytes())
		}
		for _, rs := range req.ResourceSpans {
			res := map[string]string{}
			for _, a := range rs.Resource.Attributes {
				if a.Value.String != nil {
					res[a.Key] = *a.Value.String
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					s.resource = res
					spans = append(spans, s)
				}
			}
		}
	}
	return spans
}

// otlpSummaryLimit bounds the time from SIGINT to the summary's export
// line under emulation.
const otlpSummaryLimit = 5 * time.Second

// otlpLine is the summary's line about the export.
var otlpLine = regexp.MustCompile(`trawl: otlp: (\d+) spans: (\d+) exported, (\d+) dropped \(export queue full, or an event whose call never ended\), (\d+) not exported`)

// TestOTLPCollector exports the calls of a workload to a real
// OpenTelemetry Collector, over gRPC and over HTTP, while writing them
// with --json, and checks the collector's spans one by one against the
// JSON lines: names, times, attributes, resource and parent links. The
// spans carry every value (--otlp-values all), whole (a limit no value
// reaches).
func TestOTLPCollector(t *testing.T) {
	bin := requireCollector(t)
	var uts unix.Utsname
	unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	for _, proto := range []string{"grpc", "http"} {
		t.Run(proto, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "spans.jsonl")
			grpcAddr, httpAddr := startCollector(t, bin, out)
			url := "grpc://" + grpcAddr
			if proto == "http" {
				url = "http://" + httpAddr
			}
			jsonOut := filepath.Join(dir, "calls.json")
			cmd := trawlCmd("--otlp", url, "--otlp-values", "all", "--otlp-attribute-limit", "1048576", "--json", "-o", jsonOut, "--workload",
				"*sys_openat", "do_sys_openat2", "*sys_read", "vfs_read", "*sys_write", "vfs_write", "tcp_sendmsg")
			_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			m := otlpLine.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no export line in the summary:\n%s", stderr)
			}
			if m[1] != m[2] || m[3] != "0" || m[4] != "0" {
				t.Fatalf("not every span exported:\n%s", stderr)
			}
			body, err := os.ReadFile(jsonOut)
			if err != nil {
				t.Fatal(err)
			}
			var calls []*spanCall
			for line := range bytes.Lines(body) {
				c := &spanCall{}
				if err := json.Unmarshal(line, c); err != nil {
					t.Fatalf("--json: %v: %s", err, line)
				}
				calls = append(calls, c)
			}
			if strconv.Itoa(len(calls)) != m[1] {
				t.Fatalf("%d calls in --json, %s spans exported", len(calls), m[1])
			}
			// The file exporter flushes every 100 ms.
			var spans []*otlpSpan
			for deadline := time.Now().Add(stopLimit); ; time.Sleep(200 * time.Millisecond) {
				if spans = readSpans(t, out); len(spans) >= len(calls) || time.Now().After(deadline) {
					break
				}
			}
			if len(spans) != len(calls) {
				t.Fatalf("the collector wrote %d spans, want %d", len(spans), len(calls))
			}
			t.Logf("%d calls, %d spans", len(calls), len(spans))
			checkSpans(t, calls, spans, release)
		})
	}
}

// writeArg as the first argument makes the test binary write the second
// argument to /dev/null.
const writeArg = "__write"

// secretBuffer is what the command of writeArg writes in TestOTLPValues.
const secretBuffer = "trawl-secret-buffer"

// TestOTLPValues traces a write() of a known buffer and exports it to a
// real collector over HTTP: with the default --otlp-values the collector
// receives the write's span but no byte of the buffer, as text or hex;
// with --otlp-values all the span carries the buffer.
func TestOTLPValues(t *testing.T) {
	bin := requireCollector(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "spans.jsonl")
	_, httpAddr := startCollector(t, bin, out)
	leaks := [][]byte{[]byte(secretBuffer), []byte(hex.EncodeToString([]byte(secretBuffer)))}
	total := 0
	// The default first: the collector's file has no span of all yet.
	for _, level := range []string{"", "all"} {
		jsonOut := filepath.Join(dir, "calls"+level+".json")
		args := []string{"--otlp", "http://" + httpAddr, "--json", "-o", jsonOut}
		if level != "" {
			args = append(args, "--otlp-values", level)
		}
		args = append(args, "vfs_write", "--", os.Args[0], writeArg, secretBuffer)
		_, stderr, status := runLimited(t, trawlCmd(args...), startLimit+stopLimit)
		if status != 0 {
			t.Fatalf("%v: status %d\n%s", args, status, stderr)
		}
		m := otlpLine.FindStringSubmatch(stderr)
		if m == nil || m[1] != m[2] || m[1] == "0" {
			t.Fatalf("%v: want every span exported:\n%s", args, stderr)
		}
		// The write was traced, with its buffer.
		if body, err := os.ReadFile(jsonOut); err != nil || !bytes.Contains(body, []byte(`"buf":"`+secretBuffer+`"`)) {
			t.Fatalf("--json has no write of %q (%v):\n%s", secretBuffer, err, body)
		}
		n, _ := strconv.Atoi(m[1])
		total += n
		var spans []*otlpSpan
		for deadline := time.Now().Add(stopLimit); ; time.Sleep(200 * time.Millisecond) {
			if spans = readSpans(t, out); len(spans) >= total || time.Now().After(deadline) {
				break
			}
		}
		if len(spans) != total {
			t.Fatalf("the collector wrote %d spans, want %d", len(spans), total)
		}
		var count, buf int
		for _, s := range spans[total-n:] {
			for _, a := range s.Attributes {
				switch {
				case a.Key == "trawl.arg.count" && a.Value.Int != nil && *a.Value.Int == strconv.Itoa(len(secretBuffer)):
					count++
				case a.Key == "trawl.arg.buf" && a.Value.String != nil && *a.Value.String == secretBuffer:
					buf++
				}
			}
		}
		body, _ := os.ReadFile(out)
		leaked := bytes.Contains(body, leaks[0]) || bytes.Contains(body, leaks[1])
		t.Logf("--otlp-values %q: %d spans, %d with count=%d, %d with the buffer", level, n, count, len(secretBuffer), buf)
		switch {
		case count == 0:
			t.Errorf("--otlp-values %q: no span of the write (trawl.arg.count=%d)", level, len(secretBuffer))
		case level == "" && leaked:
			t.Errorf("default --otlp-values: the collector received the buffer's bytes:\n%s", body)
		case level == "all" && buf == 0:
			t.Errorf("--otlp-values all: no span carries trawl.arg.buf=%q", secretBuffer)
		}
	}
}

// checkSpans checks that spans are calls, one by one.
func checkSpans(t *testing.T, calls []*spanCall, spans []*otlpSpan, release string) {
	type key struct {
		tid   string
		start int64
		name  string
	}
	byKey := map[key]*otlpSpan{}
	for _, s := range spans {
		var tid string
		for _, a := range s.Attributes {
			if a.Key == "thread.id" && a.Value.Int != nil {
				tid = *a.Value.Int
			}
		}
		byKey[key{tid, s.Start, s.Name}] = s
	}
	spanOf := map[*spanCall]*otlpSpan{}
	nested := 0
	for _, c := range calls {
		s := byKey[key{strconv.FormatUint(uint64(c.TID), 10), c.start(), c.Func}]
		if s == nil {
			t.Errorf("no span of %s on task %d at %v", c.Func, c.TID, c.Time)
			continue
		}
		spanOf[c] = s
		if s.End-s.Start != c.Duration {
			t.Errorf("%s at %v: span lasts %d ns, the call %d", c.Func, c.Time, s.End-s.Start, c.Duration)
		}
		attrs := map[string]otlpAttr{}
		for _, a := range s.Attributes {
			attrs[a.Key] = a
		}
		quote := func(s string) json.RawMessage {
			b, _ := json.Marshal(s)
			return b
		}
		want := map[string]json.RawMessage{
			"process.pid":     json.RawMessage(strconv.FormatUint(uint64(c.PID), 10)),
			"process.command": quote(c.Comm),
		}
		for name, v := range c.Args {
			want["trawl.arg."+name] = v
		}
		if c.Ret != nil {
			want["trawl.ret"] = c.Ret
		}
		if c.Errno != "" {
			want["trawl.errno"] = quote(c.Errno)
		}
		for k, v := range want {
			if a, ok := attrs[k]; !ok || !a.matches(v) {
				t.Errorf("%s at %v: %s = %v, want %s", c.Func, c.Time, k, a, v)
			}
		}
		if s.resource["service.name"] != "trawl" || s.resource["os.version"] != release || s.resource["host.name"] == "" || s.resource["service.version"] == "" {
			t.Errorf("resource %v, want service.name trawl, os.version %s, host.name and service.version", s.resource, release)
		}
		if c.Depth > 0 {
			nested++
		}
	}
	if nested == 0 {
		t.Error("no nested call: parent links untested")
	}
	// The parent of a call at depth d is the call of depth d-1 on the same
	// task that was in progress when it started: the last one to start
	// before it.
	for _, c := range calls {
		s := spanOf[c]
		if s == nil || len(c.Flags) > 0 {
			continue
		}
		var parent *spanCall
		for _, p := range calls {
			if p.TID == c.TID && p.Depth == c.Depth-1 && p.start() <= c.start() && p.end() >= c.end() && (parent == nil || p.start() > parent.start()) {
				parent = p
			}
		}
		switch {
		case c.Depth == 0 && s.Parent != "":
			t.Errorf("%s at %v: outermost, but its span has parent %s", c.Func, c.Time, s.Parent)
		case c.Depth > 0 && parent == nil:
			t.Errorf("%s at %v: depth %d, but no call contains it", c.Func, c.Time, c.Depth)
		case parent != nil && (spanOf[parent] == nil || s.Parent != spanOf[parent].SpanID || s.TraceID != spanOf[parent].TraceID):
			t.Errorf("%s at %v: parent span %s in trace %s, want %s's", c.Func, c.Time, s.Parent, s.TraceID, parent.Func)
		}
	}
}

// TestOTLPCollectorDown exports to a collector that is not there, and to
// one that takes connections but never answers: the spans are counted as
// dropped or not exported, and SIGINT still stops trawl at once.
func TestOTLPCollectorDown(t *testing.T) {
	requireCollector(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for _, tc := range []struct{ name, addr, reason string }{
		{"refused", freeAddr(t), "connection refused"},
		{"silent", silent.Addr().String(), "deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := trawlCmd("--debug", "--otlp", "grpc://"+tc.addr, hotFunc, "--", os.Args[0], hotloopArg, "0s")
			errOut, done := startTrawl(t, cmd)
			started := time.Now()
			for !strings.Contains(errOut.String(), "trawl: tracing") {
				if time.Since(started) > startLimit {
					t.Fatalf("not tracing after %v\n%s", startLimit, errOut.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			// Past the export timeout (5 s), so that a silent collector
			// fails an export.
			time.Sleep(8 * time.Second)
			stopped := time.Now()
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-done:
			case <-time.After(stopLimit):
				t.Fatalf("trawl still running %v after SIGINT\n%s", stopLimit, errOut.String())
			}
			summed := errOut.when("trawl: otlp:")
			if summed.IsZero() {
				t.Fatalf("no export line in the summary:\n%s", errOut.String())
			}
			last := strings.Join(regexp.MustCompile(`otlp: (last export|traces shut down).*`).FindAllString(errOut.String(), -1), "; ")
			t.Logf("summary %v after SIGINT, exit %v after; %s", summed.Sub(stopped).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond), last)
			// The export's share is bounded at 200 ms after SIGINT, the
			// drain at 500 ms; emulation on a busy host stalls the guest for
			// seconds at times (0.6 to 1.5 s is usual), a hang is minutes.
			if took := summed.Sub(stopped); took > otlpSummaryLimit {
				t.Errorf("the summary came %v after SIGINT, want about a second, at most %v under emulation", took, otlpSummaryLimit)
			}
			m := otlpLine.FindStringSubmatch(errOut.String())
			if m == nil {
				t.Fatalf("no export line in the summary:\n%s", errOut.String())
			}
			spans, _ := strconv.Atoi(m[1])
			exported, _ := strconv.Atoi(m[2])
			dropped, _ := strconv.Atoi(m[3])
			failed, _ := strconv.Atoi(m[4])
			if spans == 0 || exported != 0 || dropped+failed != spans || failed == 0 || !strings.Contains(errOut.String(), tc.reason) {
				t.Errorf("want spans, none exported, every one dropped or not exported, because of %s:\n%s", tc.reason, errOut.String())
			}
			t.Logf("%d spans: %d dropped, %d not exported", spans, dropped, failed)
		})
	}
}

// metricTotals sums, in the last export of the collector's file that has
// trawl.calls, the calls of the functions ending in each suffix given,
// the EBADF errors, and the durations counted, by suffix.
func metricTotals(t *testing.T, path string, suffixes ...string) (calls, ebadf, durations map[string]int64) {
	body, _ := os.ReadFile(path)
	type point struct {
		Attributes []otlpAttr `json:"attributes"`
		AsInt      int64      `json:"asInt,string"`
		Count      int64      `json:"count,string"`
	}
	for line := range bytes.Lines(body) {
		var req struct {
			ResourceMetrics []struct {
				ScopeMetrics []struct {
					Metrics []struct {
						Name string `json:"name"`
						Sum  struct {
							DataPoints []point `json:"dataPoints"`
						} `json:"sum"`
						Histogram struct {
							DataPoints []point `json:"dataPoints"`
						} `json:"exponentialHistogram"`
					} `json:"metrics"`
				} `json:"scopeMetrics"`
			} `json:"resourceMetrics"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			t.Fatalf("collector output: %v\n%s", err, line)
		}
		c, e, d := map[string]int64{}, map[string]int64{}, map[string]int64{}
		found := false
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					for _, p := range append(m.Sum.DataPoints, m.Histogram.DataPoints...) {
						labels := map[string]string{}
						for _, a := range p.Attributes {
							if a.Value.String != nil {
								labels[a.Key] = *a.Value.String
							}
						}
						for _, suffix := range suffixes {
							if !strings.HasSuffix(labels["function"], suffix) {
								continue
							}
							switch m.Name {
							case "trawl.calls":
								c[suffix] += p.AsInt
								found = true
							case "trawl.call.errors":
								if labels["errno"] == "EBADF" {
									e[suffix] += p.AsInt
								}
							case "trawl.call.duration":
								d[suffix] += p.Count
							}
						}
					}
				}
			}
		}
		if found {
			calls, ebadf, durations = c, e, d
		}
	}
	return calls, ebadf, durations
}

// TestOTLPMetricsCollector exports the in-kernel counts of --stats to a
// real collector every second while a command makes a known number of
// calls, and checks the exact counts in what the collector received.
func TestOTLPMetricsCollector(t *testing.T) {
	bin := requireCollector(t)
	const getppids, closes = 2000, 30
	out := filepath.Join(t.TempDir(), "metrics.jsonl")
	grpcAddr, _ := startCollector(t, bin, out)
	cmd := trawlCmd("--stats", "--otlp", "grpc://"+grpcAddr, "--interval", "1s", "-o", os.DevNull, hotFunc, "*sys_close", "--",
		os.Args[0], callsArg, strconv.Itoa(getppids), strconv.Itoa(closes))
	errOut, done := startTrawl(t, cmd)
	deadline := time.Now().Add(startLimit + stopLimit)
	var calls, ebadf, durations map[string]int64
	for {
		calls, ebadf, durations = metricTotals(t, out, "_getppid", "_close")
		if calls["_getppid"] >= getppids && ebadf["_close"] >= closes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector never got %d getppid calls and %d EBADF (got %v, %v)\n%s", getppids, closes, calls, ebadf, errOut.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if calls["_getppid"] != getppids || ebadf["_close"] != closes || durations["_getppid"] != getppids {
		t.Errorf("collector: %d getppid calls (%d in the duration histogram), %d EBADF of close; want %d, %d, %d", calls["_getppid"], durations["_getppid"], ebadf["_close"], getppids, getppids, closes)
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(stopLimit):
		t.Fatalf("trawl still running %v after SIGINT\n%s", stopLimit, errOut.String())
	}
	// An export may time out on a busy host under emulation: the counts
	// above are what must hold.
	m := regexp.MustCompile(`trawl: otlp: metrics exported (\d+) times, (\d+) failed`).FindStringSubmatch(errOut.String())
	if m == nil || m[1] == "0" {
		t.Fatalf("want exports in the summary:\n%s", errOut.String())
	}
	t.Logf("metrics exported %s times, %s failed", m[1], m[2])
}
