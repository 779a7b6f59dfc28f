// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
)

// bufferFunc is the function of the sized-buffer measurement: each
// write(2) reaches it, and trawl pairs its buf with count, so that a call
// copies the bytes written.
const bufferFunc = "vfs_write"

// bufferBytes is how many bytes each write writes, all of them copied
// (the default --max-bytes).
const bufferBytes = 64

// bufferRound is one round of a backend's writes, ns per call: nothing
// attached, empty programs and trawl on bufferFunc.
type bufferRound struct{ base, empty, trawl float64 }

// benchBuffer measures, in rounds, the time per write(2) of bufferBytes
// to /dev/null with nothing attached, with empty programs on bufferFunc
// and with trawl's session on it, which captures the bytes written, for
// each backend, and prints the table.
func benchBuffer(ctx context.Context, backends []string, rounds int, target time.Duration) error {
	fn, err := lookup(bufferFunc)
	if err != nil {
		return err
	}
	unpin, err := pinCPU0()
	if err != nil {
		return err
	}
	defer unpin()
	null, err := os.OpenFile("/dev/null", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	buf := make([]byte, bufferBytes)
	write := func() error {
		_, err := unix.Write(int(null.Fd()), buf)
		return err
	}
	probe, err := timePerCall(2000, write)
	if err != nil {
		return err
	}
	// A call's record holds its file and buffer too: about 550 bytes.
	n := min(max(int(float64(target.Nanoseconds())/probe), 2000), maxCalls/2)

	cases := make([]func(int) (bufferRound, error), len(backends))
	for i, b := range backends {
		cases[i] = func(k int) (bufferRound, error) {
			r, err := measureBuffer(ctx, write, b, fn, n)
			fmt.Fprintf(os.Stderr, "trawl-bench: sized buffer round %d %s: %s\n", k+1, b, summary(r, err))
			return r, err
		}
	}
	runs, err := measure.Turns(ctx, rounds, cases)
	if err != nil {
		return err
	}

	fmt.Printf("### Per call: a sized buffer\n\n")
	fmt.Printf("`write(2)` of %d bytes to /dev/null, %d calls per measurement after %d warm-up calls, timed as above, on CPU 0; per round and backend: nothing attached (baseline), empty programs of trawl's attach types on `%s`, and trawl's session on it, whose plan pairs `buf` with `count` and copies the %d bytes each call writes from user memory (every call checked to be captured, none without its frame). Median of %d rounds; ratio = (trawl - baseline) / (empty - baseline), to set beside the per-call table's ratio of a call that copies no memory.\n\n", bufferBytes, n, n/10, bufferFunc, bufferBytes, rounds)
	t := measure.NewTable(os.Stdout, "backend", "baseline ns/call", "empty - baseline", "trawl - baseline", "ratio (median)", "ratio (min-max)")
	for i, b := range backends {
		if failedRow(t, b, runs[i].Err) {
			continue
		}
		rs := runs[i].Results
		base := measure.Collect(rs, func(r bufferRound) float64 { return r.base })
		empty := measure.Collect(rs, func(r bufferRound) float64 { return r.empty })
		tr := measure.Collect(rs, func(r bufferRound) float64 { return r.trawl })
		ratios := measure.Over(tr, base, empty)
		t.Row(b, measure.Ns(base.Median()), measure.Ns(empty.Median()-base.Median()), measure.Ns(tr.Median()-base.Median()), measure.Times(ratios.Median()), measure.Range(ratios))
	}
	t.End()
	return nil
}

// measureBuffer measures one baseline, one empty and one trawl round of
// backend b's writes.
func measureBuffer(ctx context.Context, write func() error, b string, fn trawl.Function, n int) (bufferRound, error) {
	var r bufferRound
	var err error
	if r.base, err = timePerCall(n, write); err != nil {
		return r, err
	}
	attach, ok := empties[b]
	if !ok {
		return r, fmt.Errorf("the bench has no empty program for backend %s", b)
	}
	closers, err := attach(fn)
	if err != nil {
		return r, err
	}
	r.empty, err = timePerCall(n, write)
	if cerr := closeAll(closers); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}
	sess, err := trawl.Open(ctx, trawl.Config{Patterns: []string{bufferFunc}, Backend: trawl.Backend(b)})
	if err != nil {
		return r, err
	}
	r.trawl, err = timePerCall(n, write)
	if err == nil {
		// Other tasks of the guest may write too.
		var st trawl.Stats
		st, err = sess.Stats()
		if err == nil && (st.Calls < calls(n) || st.Drops != 0 || st.MissStorage+st.MissDepth+st.MissEntry+st.MissExit+st.MissFrame != 0) {
			err = fmt.Errorf("trawl captured %d of %d calls (drops %d, misses %d/%d/%d/%d/%d)", st.Calls, calls(n), st.Drops,
				st.MissStorage, st.MissDepth, st.MissEntry, st.MissExit, st.MissFrame)
		}
	}
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	return r, err
}

// String summarises the round.
func (r bufferRound) String() string {
	return fmt.Sprintf("baseline %.0f ns, empty %.0f ns, trawl %.0f ns", r.base, r.empty, r.trawl)
}
