// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// soakEnv set to "full" makes TestSoak trace every traceable function for
// a minute (`make soak`); by default it traces a few hundred for a few
// seconds, to fit the CI budget.
const soakEnv = "TRAWL_SOAK"

// soakloadArg as the first argument makes the test binary run the soak
// workload for the duration in the second argument.
const soakloadArg = "__soakload"

// soakSize is what TestSoak traces, for how long, and how: every
// function counted in the kernel (--stats) in full, else a few hundred
// sent call by call through the ring buffer, where calls can be dropped.
func soakSize() (args []string, d time.Duration) {
	if os.Getenv(soakEnv) == "full" {
		return []string{"--stats", "*"}, time.Minute
	}
	return []string{"--json", "-o", os.DevNull, "vfs_*", "*sys_*", "tcp_*", "pipe_*", "do_mmap", "*fork*", "*exit*"}, 10 * time.Second
}

// TestSoak traces, system-wide with a kprobe link backend,
// while a mixed workload runs (fork and exit, files, pipes, loopback TCP,
// mmap), and checks that the guest survives, trawl stops on time, every
// call is accounted for (read + not read + dropped + filtered out at exit
// = the calls the program counted), and ftrace's enabled_functions is
// back to its count from before; then the same after kill -9 of trawl
// mid-trace.
func TestSoak(t *testing.T) {
	guest.Require(t)
	what, d := soakSize()
	if os.Getenv(soakEnv) != "full" {
		guest.Only(t, "the short soak", "amd64-6.12")
	}
	backend := ""
	for _, b := range []trawl.Backend{trawl.BackendKprobeSession, trawl.BackendKprobeMulti} {
		if _, _, err := trawl.ChooseBackend(trawl.Config{Patterns: []string{"vfs_read"}, Backend: b}); err == nil {
			backend = string(b)
			break
		} else {
			t.Logf("%s: %v", b, err)
		}
	}
	if backend == "" {
		t.Skipf("kernel %s has neither kprobe.session nor kprobe.multi", guest.Kernel())
	}
	before := enabledFunctions(t)
	t.Logf("%s, %v for %v; %d functions patched before", backend, what, d, before)

	t.Run("stop", func(t *testing.T) {
		soakStop(t, backend, what, d, before)
	})
	// Every function counted in the kernel under the workload
	// drops nothing and stops on time. A few minutes under emulation, so
	// on one kernel at the CI size (make soak does it on every kernel).
	if os.Getenv(soakEnv) != "full" && guest.Kernel() == "amd64-7.3" {
		t.Run("stats-all", func(t *testing.T) {
			soakStop(t, backend, []string{"--stats", "*"}, 10*time.Second, before)
		})
	}

	t.Run("kill-9", func(t *testing.T) {
		args := append([]string{"--backend", backend}, what...)
		cmd := trawlCmd(args...)
		var errOut syncBuffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitTracing(t, cmd, &errOut)
		// With every function traced, reading enabled_functions takes a
		// quarter of an hour under emulation: check it at the small size.
		if os.Getenv(soakEnv) != "full" {
			if during := enabledFunctions(t); during <= before {
				t.Errorf("tracing, yet %d functions patched, %d before", during, before)
			}
		}
		killTrawl(cmd)
		cmd.Wait()
		// The kernel releases the links as the descriptors close; give it
		// time under emulation.
		deadline := time.Now().Add(5 * time.Minute)
		for after := enabledFunctions(t); after != before; after = enabledFunctions(t) {
			if time.Now().After(deadline) {
				t.Fatalf("%d functions patched before trawl and %d five minutes after kill -9", before, after)
			}
			time.Sleep(time.Second)
		}
	})
}

// soakStop traces what with backend for d, system-wide, while the soak
// workload runs, and checks that trawl stops on time, accounts for every
// call and leaves as many functions patched as before.
func soakStop(t *testing.T, backend string, what []string, d time.Duration, before int) {
	args := append([]string{"--backend", backend, "--duration", d.String()}, what...)
	cmd := trawlCmd(args...)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	armed := waitTracing(t, cmd, &errOut)
	load := exec.Command(os.Args[0], soakloadArg, (d + 10*time.Second).String())
	load.Stderr = os.Stderr
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		load.Process.Kill()
		load.Wait()
	}()
	select {
	case err := <-done:
		if status := exitStatus(t, err); status != 0 {
			t.Errorf("status %d\n%s", status, errOut.String())
		}
	case <-time.After(d + stopLimit + 10*time.Minute):
		killTrawl(cmd)
		t.Fatalf("still running long after its duration\n%s", errOut.String())
	}
	stopping, summed := errOut.when("trawl: stopping"), errOut.when(" calls: ")
	t.Logf("armed to end: %v (duration %v); from stopping to the summary: %v, from the summary to the end: %v\n%s",
		time.Since(armed).Round(time.Millisecond), d, summed.Sub(stopping).Round(time.Millisecond), time.Since(summed).Round(time.Millisecond), errOut.String())
	if took := summed.Sub(stopping); took > stopLimit {
		t.Errorf("the summary came %v after stopping, more than %v", took.Round(time.Millisecond), stopLimit)
	}
	reconcile(t, errOut.String())
	if after := enabledFunctions(t); after != before {
		t.Errorf("%d functions patched before trawl and %d after it exited", before, after)
	}
}

// waitTracing waits until trawl says it is tracing, and returns when.
func waitTracing(t *testing.T, cmd *exec.Cmd, stderr *syncBuffer) time.Time {
	t.Helper()
	start := time.Now()
	for !bytes.Contains([]byte(stderr.String()), []byte("trawl: tracing")) {
		if time.Since(start) > 15*time.Minute {
			killTrawl(cmd)
			t.Fatalf("not tracing after 15 minutes\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("tracing after %v", time.Since(start).Round(time.Millisecond))
	return time.Now()
}

var finalLine = regexp.MustCompile(`trawl: by the end of the detach, (\d+) calls: (?:(\d+) read, (\d+) not read, (\d+) dropped \(ring buffer full\)|(\d+) counted in the kernel), (\d+) filtered out at exit`)

// reconcile checks the final account of a trace: every call the program
// counted was read, not read, dropped or filtered out at exit.
func reconcile(t *testing.T, stderr string) {
	t.Helper()
	m := finalLine.FindStringSubmatch(stderr)
	if m == nil {
		// Nothing changed during the detach: the summary is final.
		m = callsLine.FindStringSubmatch(stderr)
	}
	if m == nil {
		t.Fatalf("no summary:\n%s", stderr)
	}
	n := account(m)
	if n[0] == 0 {
		t.Error("no call counted")
	}
	if sum := n[1] + n[2] + n[3] + n[4]; sum != n[0] {
		t.Errorf("read %d + not read %d + dropped %d + filtered %d = %d, but the program counted %d calls", n[1], n[2], n[3], n[4], sum, n[0])
	}
}

// enabledFunctions counts the functions ftrace has patched.
func enabledFunctions(t *testing.T) int {
	t.Helper()
	n, err := guest.EnabledFunctions()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// soakload runs a mixed workload for d: processes forked and exiting,
// files written and read, pipes, loopback TCP and mmap, one goroutine
// each.
func soakload(d time.Duration) error {
	end := time.Now().Add(d)
	dir, err := os.MkdirTemp("", "trawl-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	jobs := []func(i int) error{
		func(int) error { return exec.Command(os.Args[0], hotloopArg, "1ms").Run() },
		func(i int) error {
			path := filepath.Join(dir, strconv.Itoa(i%8))
			if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 4096), 0o600); err != nil {
				return err
			}
			_, err := os.ReadFile(path)
			return err
		},
		func(int) error {
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			defer r.Close()
			defer w.Close()
			w.Write([]byte("ping"))
			_, err = r.Read(make([]byte, 4))
			return err
		},
		func(int) error {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return err
			}
			defer c.Close()
			c.Write([]byte("ping"))
			_, err = io.ReadFull(c, make([]byte, 4))
			return err
		},
		func(int) error {
			b, err := syscall.Mmap(-1, 0, 1<<16, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				return err
			}
			b[0] = 1
			return syscall.Munmap(b)
		},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for j, job := range jobs {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				if err := job(i); err != nil {
					errs[j] = fmt.Errorf("job %d: %w", j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
