// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel"
)

// bufferFunc is the function of the sized-buffer measurement: each
// write(2) reaches it, and trawl pairs its buf with count, so that a call
// copies the bytes written.
const bufferFunc = "vfs_write"

// bufferBytes is how many bytes each write writes, all of them copied
// (the default --max-bytes).
const bufferBytes = 64

// bufferSamples holds one backend's per-round measurements of writes,
// ns per call: nothing attached, empty programs and trawl on bufferFunc.
type bufferSamples struct {
	base, empty, trawl []float64
	err                error
}

// benchBuffer measures, in rounds, the time per write(2) of bufferBytes
// to /dev/null with nothing attached, with empty programs on bufferFunc
// and with trawl's session on it, which captures the bytes written, for
// each backend, and prints the table.
func benchBuffer(ctx context.Context, cat *kernel.Catalogue, backends []string, rounds int, target time.Duration) error {
	fns := cat.Lookup(bufferFunc)
	if len(fns) == 0 {
		return fmt.Errorf("kernel has no %s", bufferFunc)
	}
	fn := fns[0]
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		return fmt.Errorf("pin to CPU 0: %w", err)
	}
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

	samples := map[string]*bufferSamples{}
	for _, b := range backends {
		samples[b] = &bufferSamples{}
	}
	for r := range rounds {
		for _, b := range backends {
			s := samples[b]
			if s.err != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			s.err = bufferRound(ctx, write, b, fn, n, s)
			fmt.Fprintf(os.Stderr, "trawl-bench: sized buffer round %d %s: %v\n", r+1, b, s)
		}
	}

	fmt.Printf("### Per call: a sized buffer\n\n")
	fmt.Printf("`write(2)` of %d bytes to /dev/null, %d calls per measurement after %d warm-up calls, timed as above, on CPU 0; per round and backend: nothing attached (baseline), empty programs of trawl's attach types on `%s`, and trawl's session on it, whose plan pairs `buf` with `count` and copies the %d bytes each call writes from user memory (every call checked to be captured, none without its frame). Median of %d rounds; ratio = (trawl - baseline) / (empty - baseline), to set beside the per-call table's ratio of a call that copies no memory.\n\n", bufferBytes, n, n/10, bufferFunc, bufferBytes, rounds)
	fmt.Println("| backend | baseline ns/call | empty - baseline | trawl - baseline | ratio (median) | ratio (min-max) |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, b := range backends {
		s := samples[b]
		switch {
		case s.err != nil && notSupported(s.err):
			fmt.Printf("| %s | not supported by this kernel | | | | |\n", b)
			continue
		case s.err != nil:
			fmt.Printf("| %s | error: %s | | | | |\n", b, oneLine(s.err))
			continue
		}
		var ratios []float64
		for i := range s.base {
			ratios = append(ratios, (s.trawl[i]-s.base[i])/(s.empty[i]-s.base[i]))
		}
		base, empty, tr := median(s.base), median(s.empty), median(s.trawl)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.2f | %.2f-%.2f |\n", b, base, empty-base, tr-base, median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	fmt.Println()
	return nil
}

// bufferRound adds one baseline, one empty and one trawl measurement of
// backend b's writes to s.
func bufferRound(ctx context.Context, write func() error, b string, fn *kernel.Function, n int, s *bufferSamples) error {
	base, err := timePerCall(n, write)
	if err != nil {
		return err
	}
	attach, ok := empties[b]
	if !ok {
		return fmt.Errorf("the bench has no empty program for backend %s", b)
	}
	closers, err := attach(fn)
	if err != nil {
		return err
	}
	empty, err := timePerCall(n, write)
	if cerr := closeAll(closers); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	sess, err := trawl.Open(ctx, trawl.Config{Patterns: []string{bufferFunc}, Backend: trawl.Backend(b)})
	if err != nil {
		return err
	}
	tr, err := timePerCall(n, write)
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
	if err != nil {
		return err
	}
	s.base, s.empty, s.trawl = append(s.base, base), append(s.empty, empty), append(s.trawl, tr)
	return nil
}

// String summarises the last round.
func (s *bufferSamples) String() string {
	if s.err != nil {
		return "error: " + s.err.Error()
	}
	if len(s.base) == 0 {
		return "no samples"
	}
	i := len(s.base) - 1
	return fmt.Sprintf("baseline %.0f ns, empty %.0f ns, trawl %.0f ns", s.base[i], s.empty[i], s.trawl[i])
}
