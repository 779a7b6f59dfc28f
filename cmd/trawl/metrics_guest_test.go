// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestMetricsEndpoint runs trawl --stats --listen while a command makes
// a known number of calls, scrapes /metrics until the counts are in, and
// checks them exactly; then /healthz, and that SIGINT stops trawl.
func TestMetricsEndpoint(t *testing.T) {
	guest.Require(t)
	const getppids, closes = 3000, 70
	addr := freeAddr(t)
	cmd := trawlCmd("--stats", "--listen", addr, "-o", os.DevNull, hotFunc, "*sys_close", "--",
		os.Args[0], callsArg, strconv.Itoa(getppids), strconv.Itoa(closes))
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()

	calls := func(mfs map[string]*dto.MetricFamily, suffix, errno string) (n float64) {
		name := "trawl_calls_total"
		if errno != "" {
			name = "trawl_call_errors_total"
		}
		for _, m := range mfs[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if strings.HasSuffix(labels["function"], suffix) && (errno == "" || labels["errno"] == errno) {
				n += m.GetCounter().GetValue()
			}
		}
		return n
	}
	var mfs map[string]*dto.MetricFamily
	deadline := time.Now().Add(startLimit + stopLimit)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the counts never reached %d getppid and %d failed close calls; last scrape: %v\nstderr:\n%s", getppids, closes, mfs["trawl_calls_total"], errOut.String())
		}
		time.Sleep(500 * time.Millisecond)
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue // not serving yet: trawl starts up
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err = p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("parse /metrics: %v", err)
		}
		if calls(mfs, "_getppid", "") >= getppids && calls(mfs, "_close", "EBADF") >= closes {
			break
		}
	}
	if got := calls(mfs, "_getppid", ""); got != getppids {
		t.Errorf("getppid: %v calls, want %d", got, getppids)
	}
	if got := calls(mfs, "_close", "EBADF"); got != closes {
		t.Errorf("close: %v EBADF errors, want %d", got, closes)
	}
	for _, name := range []string{"trawl_call_duration_seconds", "trawl_functions", "trawl_build_info", "trawl_missed_total", "trawl_dropped_total"} {
		if mfs[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d %s", resp.StatusCode, body)
	}

	stopped := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		done <- nil
	case <-time.After(stopLimit):
		t.Fatalf("trawl still running %v after SIGINT\n%s", stopLimit, errOut.String())
	}
	t.Logf("stopped %v after SIGINT", time.Since(stopped).Round(time.Millisecond))
	if !strings.Contains(errOut.String(), "stopping: interrupted") || !strings.Contains(errOut.String(), "counted in the kernel") {
		t.Errorf("no stop or summary:\n%s", errOut.String())
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("still serving after trawl exited")
	}
}

// TestPrometheusScrapes runs Debian's Prometheus server in the guest,
// scraping trawl --stats --listen every second while a command makes a
// known number of calls, and asks Prometheus's HTTP API for the count;
// promtool checks the endpoint's output.
func TestPrometheusScrapes(t *testing.T) {
	guest.Require(t)
	if k := guest.Kernel(); k != "amd64-7.3" && k != "arm64-7.3" {
		t.Skipf("a Prometheus server runs on the 7.3 guests only, to keep make test within the CI budget; this is %s", k)
	}
	server, promtool, err := guest.Prometheus()
	if err != nil {
		t.Skip(err)
	}
	const getppids, closes = 2000, 30
	trawlAddr, promAddr := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: trawl\n    static_configs:\n      - targets: [%q]\n", trawlAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command(server[0], append(server[1:], "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--enable-feature=native-histograms")...)
	var promOut syncBuffer
	prom.Stdout, prom.Stderr = &promOut, &promOut
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		prom.Process.Kill()
		prom.Wait()
	}()

	cmd := trawlCmd("--stats", "--listen", trawlAddr, "-o", os.DevNull, hotFunc, "*sys_close", "--",
		os.Args[0], callsArg, strconv.Itoa(getppids), strconv.Itoa(closes))
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}()

	// query returns the value of a PromQL expression, -1 if none yet.
	query := func(expr string) float64 {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Data.Result) != 1 {
			return -1
		}
		s, _ := r.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return -1
		}
		return v
	}
	calls := `sum(trawl_calls_total{function=~".*_getppid"})`
	ebadf := `sum(trawl_call_errors_total{function=~".*_close",errno="EBADF"})`
	deadline := time.Now().Add(startLimit + stopLimit)
	for query(calls) < getppids || query(ebadf) < closes {
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus never saw %d getppid calls and %d EBADF (saw %v and %v)\ntrawl:\n%s\nprometheus:\n%s", getppids, closes, query(calls), query(ebadf), errOut.String(), promOut.String())
		}
		time.Sleep(time.Second)
	}
	if got := query(calls); got != getppids {
		t.Errorf("Prometheus: %v getppid calls, want %d", got, getppids)
	}
	if got := query(ebadf); got != closes {
		t.Errorf("Prometheus: %v EBADF errors of close, want %d", got, closes)
	}
	// With native histograms on, Prometheus negotiates protobuf and keeps
	// the native buckets (the classic ones are checked on the host).
	if got := query(`sum(histogram_count(trawl_call_duration_seconds{function=~".*_getppid"}))`); got != getppids {
		t.Errorf("Prometheus: the native duration histogram counts %v getppid calls, want %d", got, getppids)
	}

	resp, err := http.Get("http://" + trawlAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check := exec.Command(promtool[0], append(promtool[1:], "check", "metrics")...)
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
