// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
	"github.com/trawl-dev/trawl/internal/workload"
)

// overviewScript is bpftrace's answer to the overview job: every kprobe,
// each call counted per function in the kernel.
const overviewScript = "kprobe:* { @[func] = count(); }"

// timeWorkload runs the workload rounds times and returns the fastest
// run: host load only ever slows a run down.
func timeWorkload(ctx context.Context, loops, rounds int) (time.Duration, error) {
	runs, err := measure.Turns(ctx, rounds, []func(int) (time.Duration, error){func(k int) (time.Duration, error) {
		start := time.Now()
		if err := workload.Run(ctx, loops); err != nil {
			return 0, err
		}
		d := time.Since(start)
		fmt.Fprintf(os.Stderr, "trawl-bench: overview: workload run %d of %d: %s\n", k+1, rounds, round(d))
		return d, nil
	}})
	if err = cmp.Or(err, runs[0].Err); err != nil {
		return 0, err
	}
	return measure.Fastest(runs[0].Results, func(d time.Duration) time.Duration { return d }), nil
}

// settle waits until the untraced workload runs within a quarter of base
// again, or a settleLimit has passed: the kernel frees a detached
// tracer's trampolines and probes after the links are closed, and that
// work would slow down the next tracer's runs.
func settle(ctx context.Context, loops int, base time.Duration) error {
	start := time.Now()
	for {
		d, err := timeWorkload(ctx, loops, 1)
		if err != nil {
			return err
		}
		if d <= base*5/4 || time.Since(start) > settleLimit {
			fmt.Fprintf(os.Stderr, "trawl-bench: overview: settled after %s (untraced workload %s, %s at first)\n", round(time.Since(start)), round(d), round(base))
			return nil
		}
		time.Sleep(time.Second)
	}
}

// settleLimit bounds the wait of settle.
const settleLimit = 3 * time.Minute

// overviewResult is the workload's time under one tracer.
type overviewResult struct {
	attach, run time.Duration
	// what says what was attached and counted.
	what string
	why  string // why there is no measurement
}

// benchOverview times the workload untraced, under trawl counting every
// function in the kernel (Config.Aggregate, what `trawl --stats '*'`
// runs, the backend auto picks) and under bpftrace's kprobe:* count, and
// prints the slowdowns.
func benchOverview(ctx context.Context, cat *kernel.Catalogue, loops, rounds int, limit time.Duration) error {
	fmt.Printf("### The overview job: every function counted, against bpftrace\n\n")
	base, err := timeWorkload(ctx, loops, rounds)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "trawl-bench: overview: untraced workload %s\n", round(base))
	tr, b, skipped := overviewTrawl(ctx, loops, rounds)
	if err := settle(ctx, loops, base); err != nil {
		return err
	}
	fl := overviewFloor(ctx, cat, b, skipped, loops, rounds)
	if err := settle(ctx, loops, base); err != nil {
		return err
	}
	bt := overviewBpftrace(ctx, loops, rounds, limit)
	fmt.Printf("A fixed workload, %d loops of what `trawl --workload` does (write, read and stat a file, a pipe, a loopback TCP connection), timed untraced, under trawl.Open of `*` with Config.Aggregate (what `trawl --stats '*'` runs: calls, errors and a latency histogram per function, counted in the kernel; backend auto), under empty programs of the attach types of trawl's backend on the functions trawl attached (trawl's floor: what the kernel's hooks cost before any program does anything), and under bpftrace `%s`, in this order in one guest run, each tracer after the kernel has finished freeing the last one's (the untraced workload back within a quarter of its time). Each time is the fastest of %d runs of the workload while the tracer is attached; under bpftrace the runs must end within %s. slowdown: traced time / untraced time; target: trawl's below bpftrace's.\n\n", loops, overviewScript, rounds, limit)
	t := measure.NewTable(os.Stdout, "tracer", "attached", "attach time", "workload time", "slowdown")
	t.Row("none", "", "", round(base).String(), "1.00")
	for _, r := range []struct {
		name string
		overviewResult
	}{{"trawl --stats '*'", tr}, {"empty programs (" + b + ")", fl}, {"bpftrace " + overviewScript, bt}} {
		if r.why != "" {
			t.Row(r.name, r.why)
			continue
		}
		t.Row(r.name, r.what, round(r.attach).String(), round(r.run).String(), measure.Times(r.run.Seconds()/base.Seconds()))
	}
	t.End()
	return nil
}

// overviewTrawl times the workload under trawl counting every function.
// It returns the backend auto took and the functions trawl skipped.
func overviewTrawl(ctx context.Context, loops, rounds int) (overviewResult, string, trawl.Skips) {
	start := time.Now()
	s, err := trawl.Open(ctx, trawl.Config{Patterns: []string{"*"}, Aggregate: true, Progress: progress("overview", start)})
	if err != nil {
		return overviewResult{why: "error: " + oneLine(err)}, "", nil
	}
	defer s.Close()
	r := overviewResult{attach: time.Since(start)}
	if r.run, err = timeWorkload(ctx, loops, rounds); err != nil {
		return overviewResult{why: "error: " + oneLine(err)}, "", nil
	}
	st, err := s.Stats()
	if err != nil {
		return overviewResult{why: "error: " + oneLine(err)}, "", nil
	}
	var misses uint64
	for _, n := range st.RecursionMisses {
		misses += n
	}
	r.what = fmt.Sprintf("%d functions (%s), %d calls counted, %d dropped, %d recursion misses", st.Attached, s.Backend, st.Counted, st.Drops, misses)
	fmt.Fprintf(os.Stderr, "trawl-bench: overview: trawl attached in %s, workload %s\n", round(r.attach), round(r.run))
	return r, string(s.Backend), st.Skipped
}

// overviewFloor times the workload under empty programs of backend b's
// attach types on the functions trawl attached with b: what the kernel's
// hooks cost on every function before any program does any work.
func overviewFloor(ctx context.Context, cat *kernel.Catalogue, b string, skipped trawl.Skips, loops, rounds int) overviewResult {
	if !hasFloor(b) {
		return overviewResult{why: "the bench has no empty links for backend " + b}
	}
	sel, err := selector.Select(cat, []string{"*"})
	if err != nil {
		return overviewResult{why: "error: " + oneLine(err)}
	}
	addrs, ids, funcs := floorTargets(b, sel.Selected, skipped)
	start := time.Now()
	closers, err := emptyLinks(b, addrs, ids)
	if err != nil {
		return overviewResult{why: "error: " + oneLine(err)}
	}
	defer closeAll(closers)
	r := overviewResult{attach: time.Since(start), what: fmt.Sprintf("%d functions", funcs)}
	if r.run, err = timeWorkload(ctx, loops, rounds); err != nil {
		return overviewResult{why: "error: " + oneLine(err)}
	}
	fmt.Fprintf(os.Stderr, "trawl-bench: overview: empty programs attached in %s, workload %s\n", round(r.attach), round(r.run))
	return r
}

// overviewBpftrace times the workload under bpftrace's kprobe:* count.
// bpftrace runs until the workload is done, or limit has passed, then
// gets SIGINT.
func overviewBpftrace(ctx context.Context, loops, rounds int, limit time.Duration) overviewResult {
	cmd, err := guest.Bpftrace()
	if err == nil {
		_, err = os.Stat(cmd[0])
	}
	if err != nil {
		return overviewResult{why: "not available: " + oneLine(err)}
	}
	c := exec.CommandContext(ctx, cmd[0], append(slices.Clone(cmd[1:]), "-e", overviewScript)...)
	c.Env = append(os.Environ(), notifyAttached+"=1", "BPFTRACE_MAX_PROBES=1000000", "BPFTRACE_MAX_BPF_PROGS=1000000")
	var stdout bytes.Buffer
	c.Stdout = &stdout
	stderr, err := c.StderrPipe()
	if err != nil {
		return overviewResult{why: "error: " + oneLine(err)}
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return overviewResult{why: "error: " + oneLine(err)}
	}
	// attached gets nil once bpftrace says its probes are attached, or
	// why it never will.
	attached := make(chan error, 1)
	// messages are bpftrace's other lines on stderr, to be read once
	// done is closed.
	var messages []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		lines := bufio.NewScanner(stderr)
		said := false
		for lines.Scan() {
			if lines.Text() == notifyAttached && !said {
				said = true
				attached <- nil
				continue
			}
			messages = append(messages, lines.Text())
		}
		if !said {
			attached <- fmt.Errorf("bpftrace exited without attaching its probes")
		}
	}()
	fail := func(err error) overviewResult {
		c.Process.Kill()
		<-done
		c.Wait()
		return overviewResult{why: "error: " + oneLine(fmt.Errorf("%w: %s", err, strings.Join(messages, " / ")))}
	}
	if err := <-attached; err != nil {
		return fail(err)
	}
	r := overviewResult{attach: time.Since(start)}
	fmt.Fprintf(os.Stderr, "trawl-bench: overview: bpftrace attached in %s\n", round(r.attach))
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if r.run, err = timeWorkload(wctx, loops, rounds); err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("the workload did not end within %s", limit)
		}
		return fail(err)
	}
	c.Process.Signal(syscall.SIGINT)
	fmt.Fprintf(os.Stderr, "trawl-bench: overview: bpftrace stopping\n")
	<-done
	if err := c.Wait(); err != nil {
		return overviewResult{why: "error: " + oneLine(fmt.Errorf("bpftrace: %w: %s", err, strings.Join(messages, " / ")))}
	}
	// "Attaching N probes...", then the map, one "@[func]: count" line
	// per function called.
	var probes int
	fmt.Sscanf(stdout.String(), "Attaching %d probes", &probes)
	r.what = fmt.Sprintf("%d probes, %d functions called", probes, strings.Count(stdout.String(), "\n@["))
	return r
}
