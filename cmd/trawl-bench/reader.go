// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/render"
)

// getppidFuncs are the names getppid(2)'s own kernel function goes by,
// in order of preference: the first the kernel has is traced.
var getppidFuncs = []string{"__do_sys_getppid", "__x64_sys_getppid", "__arm64_sys_getppid"}

// drainRing is the ring buffer of the drain measurement: room for every
// call of a burst, so that none is dropped before the reader starts.
const drainRing = 64 << 20

// readerRound is one round of a backend's reader measurements.
type readerRound struct {
	// trawlRate and floorRate are the records per second a full ring
	// buffer is emptied at: decoded and written as JSON to io.Discard,
	// and consumed only (Session.Discard).
	trawlRate, floorRate float64
	// trawlLive and floorLive are the records read and dropped while a
	// getppid loop runs on another CPU.
	trawlLive, floorLive liveCount
	// command is the trawl command's count of the same loop.
	command liveCount
}

// liveCount is what became of a loop's calls: read, or dropped as the
// ring buffer was full.
type liveCount struct{ read, dropped uint64 }

func (c liveCount) String() string { return fmt.Sprintf("%d read, %d dropped", c.read, c.dropped) }

// benchReader measures, per backend, how fast trawl reads calls and
// writes them as JSON against a reader that only consumes the same ring
// buffer, and what each loses while a loop of calls runs, and prints the
// tables.
// With profileDir, the CPU profile of trawl's drains goes into it as
// reader-BACKEND-cpu.pprof.
func benchReader(ctx context.Context, backends []string, rounds, burst, loop int, profileDir string) error {
	fn, err := lookupFirst(getppidFuncs)
	if err != nil {
		return err
	}
	command, err := trawlCommand()
	if err != nil {
		return err
	}
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("the reader bench wants 2 CPUs, one for the loop and one for the reader: the guest has %d", runtime.NumCPU())
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := pin(0); err != nil {
		return err
	}
	cases := make([]func(int) (readerRound, error), len(backends))
	for i, b := range backends {
		cases[i] = func(k int) (readerRound, error) {
			profile := ""
			if profileDir != "" {
				profile = filepath.Join(profileDir, "reader-"+b)
			}
			r, err := measureReader(ctx, command, b, fn.Name, burst, loop, profile)
			fmt.Fprintf(os.Stderr, "trawl-bench: reader round %d %s: %s\n", k+1, b, summary(r, err))
			return r, err
		}
	}
	runs, err := measure.Turns(ctx, rounds, cases)
	if err != nil {
		return err
	}

	fmt.Printf("### Reader: records per second\n\n")
	fmt.Printf("A burst of %d `getppid(2)` calls by the bench (pinned to CPU 1) fills a %d MiB ring buffer with one record per call of trawl's session on `%s` (no drop checked), then the reader (pinned to CPU 0) empties it, timed: trawl reads each with `Session.Read` and writes it with the JSON renderer to `io.Discard`; the floor consumes the same ring buffer with cilium/ebpf's reader and discards each record unread (`Session.Discard`). Median of %d rounds; ratio = trawl / floor, higher is better.\n\n", burst, drainRing>>20, fn.Name, rounds)
	t := measure.NewTable(os.Stdout, "backend", "trawl records/s", "floor records/s", "ratio (median)", "ratio (min-max)")
	for i, b := range backends {
		if failedRow(t, b, runs[i].Err) {
			continue
		}
		rs := runs[i].Results
		tr := measure.Collect(rs, func(r readerRound) float64 { return r.trawlRate })
		fl := measure.Collect(rs, func(r readerRound) float64 { return r.floorRate })
		ratios := measure.Collect(rs, func(r readerRound) float64 { return r.trawlRate / r.floorRate })
		t.Row(b, measure.Ns(tr.Median()), measure.Ns(fl.Median()), measure.Times(ratios.Median()), measure.Range(ratios))
	}
	t.End()

	fmt.Printf("### Reader: a loop under trace\n\n")
	fmt.Printf("A loop of %d `getppid(2)` calls on CPU 1 while the reader reads on CPU 0, through the default %d MiB ring buffer: the session read with `Session.Read` and JSON to `io.Discard`, the floor with `Session.Discard`, and the command `trawl -f json -o /dev/null -b BACKEND %s -- trawl-bench -getppid-loop %d` (its summary's read and dropped). Records read / dropped, median of %d rounds.\n\n", loop, trawl.DefaultRingBufferSize>>20, fn.Name, loop, rounds)
	t = measure.NewTable(os.Stdout, "backend", "session read", "session dropped", "floor read", "floor dropped", "command read", "command dropped")
	for i, b := range backends {
		if failedRow(t, b, runs[i].Err) {
			continue
		}
		rs := runs[i].Results
		med := func(f func(readerRound) uint64) string {
			return measure.Ns(measure.Collect(rs, func(r readerRound) float64 { return float64(f(r)) }).Median())
		}
		t.Row(b, med(func(r readerRound) uint64 { return r.trawlLive.read }), med(func(r readerRound) uint64 { return r.trawlLive.dropped }),
			med(func(r readerRound) uint64 { return r.floorLive.read }), med(func(r readerRound) uint64 { return r.floorLive.dropped }),
			med(func(r readerRound) uint64 { return r.command.read }), med(func(r readerRound) uint64 { return r.command.dropped }))
	}
	t.End()
	return nil
}

// measureReader measures one round of backend b on fn, profiling the
// CPU of trawl's drain into profile-cpu.pprof unless profile is empty.
func measureReader(ctx context.Context, command, b, fn string, burst, loop int, profile string) (readerRound, error) {
	var r readerRound
	cfg := trawl.Config{Patterns: []string{fn}, Backend: trawl.Backend(b), PIDs: []int{os.Getpid()}, RingBufferSize: drainRing}
	err := withSession(ctx, cfg, func(s *trawl.Session) error {
		stop, err := startCPUProfile(profile)
		if err != nil {
			return err
		}
		r.trawlRate, err = drainRate(s, burst, readJSON())
		if err = errors.Join(err, stop()); err != nil {
			return err
		}
		r.floorRate, err = drainRate(s, burst, discardAll)
		return err
	})
	if err != nil {
		return r, err
	}
	cfg.RingBufferSize = 0
	if err := withSession(ctx, cfg, func(s *trawl.Session) (err error) {
		r.trawlLive, err = live(s, loop, readJSON())
		return err
	}); err != nil {
		return r, err
	}
	if err := withSession(ctx, cfg, func(s *trawl.Session) (err error) {
		r.floorLive, err = live(s, loop, discardAll)
		return err
	}); err != nil {
		return r, err
	}
	r.command, err = commandLoop(ctx, command, b, fn, loop)
	return r, err
}

// withSession opens a session of cfg, runs f on it and closes it.
func withSession(ctx context.Context, cfg trawl.Config, f func(*trawl.Session) error) error {
	s, err := trawl.Open(ctx, cfg)
	if err != nil {
		return err
	}
	err = f(s)
	return errors.Join(err, s.Close())
}

// consumer empties s's ring buffer of what is waiting in it and returns
// how many records it consumed.
type consumer func(s *trawl.Session) (uint64, error)

// readJSON returns a consumer that reads each waiting call and writes it
// as JSON to io.Discard, as the trawl command does with -f json.
func readJSON() consumer {
	var c trawl.Call
	j := render.NewJSON(io.Discard, render.Options{})
	return func(s *trawl.Session) (uint64, error) {
		n := uint64(0)
		s.SetDeadline(time.Now())
		defer s.SetDeadline(time.Time{})
		for {
			err := s.Read(context.Background(), &c)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return n, j.Flush()
			}
			if err != nil {
				return n, err
			}
			if err := j.Call(&c); err != nil {
				return n, err
			}
			n++
		}
	}
}

// discardAll consumes the waiting records unread.
func discardAll(s *trawl.Session) (uint64, error) {
	n, err := s.Discard()
	return uint64(n), err
}

// drainRate fills s's ring buffer with burst calls, none dropped, then
// empties it with consume and returns the records consumed per second.
func drainRate(s *trawl.Session, burst int, consume consumer) (float64, error) {
	before, err := s.Stats()
	if err != nil {
		return 0, err
	}
	if err := runOn(1, func() { getppidLoop(burst) }); err != nil {
		return 0, err
	}
	after, err := s.Stats()
	if err != nil {
		return 0, err
	}
	if d := after.Drops - before.Drops; d != 0 {
		return 0, fmt.Errorf("the ring buffer dropped %d of a burst of %d calls: make the burst smaller", d, burst)
	}
	var gc runtime.MemStats
	runtime.ReadMemStats(&gc)
	start, gcs := time.Now(), gc.NumGC
	n, err := consume(s)
	took := time.Since(start)
	runtime.ReadMemStats(&gc)
	fmt.Fprintf(os.Stderr, "trawl-bench: reader: drained %d records in %s, %d collections, heap %d MiB\n", n, round(took), gc.NumGC-gcs, gc.HeapAlloc>>20)
	if err != nil {
		return 0, err
	}
	if n < uint64(burst) {
		return 0, fmt.Errorf("read %d records of a burst of %d calls", n, burst)
	}
	return float64(n) / took.Seconds(), nil
}

// live runs a loop of n calls on CPU 1 while consume empties s's ring
// buffer on this CPU, then what is left, and counts the records read and
// dropped.
func live(s *trawl.Session, n int, consume consumer) (liveCount, error) {
	done := make(chan error, 1)
	go func() { done <- runOn(1, func() { getppidLoop(n) }) }()
	var c liveCount
	for looping := true; looping; {
		select {
		case err := <-done:
			if err != nil {
				return c, err
			}
			looping = false
		default:
		}
		k, err := consume(s)
		if err != nil {
			return c, err
		}
		c.read += k
	}
	st, err := s.Stats()
	c.dropped = st.Drops
	return c, err
}

// runOn runs f on a thread pinned to cpu and waits for it.
func runOn(cpu int, f func()) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := pin(cpu); err != nil {
			done <- err
			return
		}
		f()
		done <- nil
	}()
	return <-done
}

// pin pins the calling thread to cpu.
func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// getppidLoop calls getppid(2) n times.
func getppidLoop(n int) {
	for range n {
		unix.Getppid()
	}
}

// runGetppidLoop is the bench run as the trawl command's workload: n
// calls of getppid(2) on the last CPU.
func runGetppidLoop(n int) error {
	return runOn(runtime.NumCPU()-1, func() { getppidLoop(n) })
}

// commandLoop runs the trawl command on fn with backend b, writing JSON
// to /dev/null, over a loop of n calls by this bench run again, and
// returns the records read and dropped its summary counts.
func commandLoop(ctx context.Context, command, b, fn string, n int) (liveCount, error) {
	self, err := os.Executable()
	if err != nil {
		return liveCount{}, err
	}
	c := exec.CommandContext(ctx, command, "-f", "json", "-o", "/dev/null", "-b", b, fn, "--", self, "-getppid-loop", fmt.Sprint(n))
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return liveCount{}, fmt.Errorf("trawl: %w: %s", err, oneLine(errors.New(stderr.String())))
	}
	return parseSummary(stderr.String())
}

// parseSummary finds the counts of the trawl command's summary line in
// its standard error.
func parseSummary(stderr string) (liveCount, error) {
	lines := bufio.NewScanner(strings.NewReader(stderr))
	for lines.Scan() {
		var calls, notRead uint64
		var c liveCount
		if _, err := fmt.Sscanf(lines.Text(), "trawl: %d calls: %d read, %d not read (the trace stopped first), %d dropped", &calls, &c.read, &notRead, &c.dropped); err == nil {
			return c, nil
		}
	}
	return liveCount{}, fmt.Errorf("no summary in trawl's output: %q", stderr)
}

// lookupFirst returns the first of names the kernel can trace.
func lookupFirst(names []string) (trawl.Function, error) {
	var errs []error
	for _, name := range names {
		fn, err := lookup(name)
		if err == nil {
			return fn, nil
		}
		errs = append(errs, err)
	}
	return trawl.Function{}, errors.Join(errs...)
}

// String summarises the round.
func (r readerRound) String() string {
	return fmt.Sprintf("drain %.0f records/s (floor %.0f), live %s (floor %s), command %s", r.trawlRate, r.floorRate, r.trawlLive, r.floorLive, r.command)
}
