// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"net"
	"net/http"
	"os"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
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
