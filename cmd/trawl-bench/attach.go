// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
)

// eligible returns the names the attach bench picks from, in catalogue
// (name) order: vmlinux functions that are traceable, have a prototype
// and an address and are not on trawl's deny list.
func eligible(cat *kernel.Catalogue) []string {
	var names []string
	funcs := cat.Functions()
	for i := range funcs {
		fn := &funcs[i]
		if fn.Traceable && selector.Denied(fn) == "" && fn.Module == "" && fn.BTFID != 0 && len(fn.Addrs) > 0 {
			names = append(names, fn.Name)
		}
	}
	return names
}

// pick returns n names spread evenly over names, the same ones for the
// same kernel every time.
func pick(names []string, n int) []string {
	n = min(n, len(names))
	out := make([]string, n)
	for i := range out {
		out[i] = names[i*len(names)/n]
	}
	return out
}

// patternFor returns one pattern selecting exactly the named vmlinux
// functions.
func patternFor(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return "vmlinux:/^(?:" + strings.Join(quoted, "|") + ")$/"
}

// attachResult is one measurement of Open and Close.
type attachResult struct {
	selected, attached int
	sel, open, close   time.Duration
	// kernelMem is how much kernel memory the open session holds, in
	// bytes (-1: unknown).
	kernelMem int64
	// peakRSS is the process's peak resident memory while Open ran, in
	// bytes (-1: unknown); maxRSS a command's over its whole run (0:
	// unknown).
	peakRSS, maxRSS int64
	// steps are Open's steps and their times, as `trawl --debug` logs
	// them; stopSteps the command's steps from an interrupt to its exit.
	steps, stopSteps string
	// output is how long the command took to write its output once
	// stopped (its "output" stop step).
	output time.Duration
	// skipped are the selected functions left out, by reason.
	skipped trawl.Skips
}

// predictor tells, from the sizes measured so far, how long opening a
// larger one will take.
type predictor struct {
	// lastOpen and lastN are the open time and function count of the last
	// size; perFunc is the time per added function from the size before.
	lastOpen, perFunc time.Duration
	lastN             int
}

// estimate predicts the open time of n functions.
func (p *predictor) estimate(n int) time.Duration {
	return p.lastOpen + p.perFunc*time.Duration(n-p.lastN)
}

// add records that n functions took open.
func (p *predictor) add(n int, open time.Duration) {
	if n > p.lastN {
		p.perFunc = max(open-p.lastOpen, 0) / time.Duration(n-p.lastN)
	}
	p.lastOpen, p.lastN = open, n
}

// attachOnce opens a session on patterns with backend b and closes it,
// timing the selection alone, Open (selection included) and Close. With
// a profiles prefix, it writes the CPU profile of Open to prefix-cpu.pprof
// and the heap profile of the open session to prefix-heap.pprof.
func attachOnce(ctx context.Context, cat *kernel.Catalogue, b string, patterns []string, profiles string) (attachResult, error) {
	var r attachResult
	start := time.Now()
	sel, err := selector.Select(cat, patterns)
	if err != nil {
		return r, err
	}
	r.sel = time.Since(start)
	r.selected = len(sel.Selected)

	memBefore, memErr := kernelMemory()
	rssErr := resetPeakRSS()
	steps.take()
	stopCPU, err := startCPUProfile(profiles)
	if err != nil {
		return r, err
	}
	start = time.Now()
	s, err := trawl.Open(ctx, trawl.Config{Patterns: patterns, Backend: trawl.Backend(b), Progress: progress(b, start)})
	r.open = time.Since(start)
	if cerr := stopCPU(); err == nil && cerr != nil {
		s.Close()
		err = cerr
	}
	if err != nil {
		return r, err
	}
	r.steps = steps.take()
	r.peakRSS = -1
	if rss, err := peakRSS("self"); err == nil && rssErr == nil {
		r.peakRSS = rss
	}
	r.kernelMem = -1
	if memAfter, err := kernelMemory(); err == nil && memErr == nil {
		r.kernelMem = memAfter - memBefore
	}
	if profiles != "" {
		if err := writeHeapProfile(profiles + "-heap.pprof"); err != nil {
			s.Close()
			return r, fmt.Errorf("write the heap profile: %w", err)
		}
	}
	st, err := s.Stats()
	r.attached, r.skipped = st.Attached, st.Skipped
	// Said before closing, which may take as long as opening.
	fmt.Fprintf(os.Stderr, "trawl-bench: %s: %d of %d attached in %s\n", b, r.attached, r.selected, round(r.open))
	start = time.Now()
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	r.close = time.Since(start)
	runtime.GC() // return the programs' memory before the next size
	return r, err
}

// kernelMemory returns the kernel memory that BPF programs, maps, BTF and
// trampolines live in: slab, vmalloc and per-CPU memory, in bytes.
func kernelMemory() (int64, error) {
	m, err := kernel.MemInfo()
	if err != nil {
		return 0, err
	}
	return m["Slab"] + m["VmallocUsed"] + m["Percpu"], nil
}

// megabytes writes n bytes in MB, "" when unknown.
func megabytes(n int64) string {
	if n < 0 {
		return ""
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// progress tells on stderr how attaching goes, each tenth of the way:
// under TCG, attaching thousands of functions one by one takes hours.
func progress(b string, start time.Time) func(attached, skipped, total int) {
	next := 0
	return func(attached, skipped, total int) {
		if done := attached + skipped; done >= next {
			fmt.Fprintf(os.Stderr, "trawl-bench: %s: %d of %d attached, %d skipped after %s\n", b, attached, total, skipped, round(time.Since(start)))
			next = done + max(total/10, 1)
		}
	}
}

// benchAttach measures attaching sizes functions with every backend and
// prints the table, then the floor table (see benchFloor). names are what
// eligible returns. A size runs only when the open time per function at
// the previous size predicts it takes less than budget: backends that load
// a program per function are far too slow under TCG for thousands. With a
// profileDir, the CPU profile of each Open and the heap profile of each
// open session go there. The floor table measures floorRounds rounds.
func benchAttach(ctx context.Context, cat *kernel.Catalogue, backends, names []string, sizes []int, budget time.Duration, profileDir string, floorRounds int) error {
	allPatterns := []string{"*"}
	all, err := selector.Select(cat, allPatterns)
	if err != nil {
		return err
	}
	command, commandErr := trawlCommand()
	if commandErr != nil {
		fmt.Fprintf(os.Stderr, "trawl-bench: the floor table runs no trawl command: %v\n", commandErr)
	}
	fmt.Printf("### Attach\n\n")
	fmt.Printf("trawl.Open on N functions picked evenly from the %d vmlinux functions that are traceable, have a prototype and an address, and are not on the deny list, as one regexp pattern; then Close. \"all\" is the pattern `*` (%d functions, modules included). Open includes selecting (also shown alone), planning, loading and attaching. Kernel memory is how much slab, vmalloc and per-CPU memory (/proc/meminfo) grew from before Open to after it; peak RSS is the bench process's peak resident memory (VmHWM, reset before Open) while Open ran, the catalogue it holds included. One run each; a size is not run when the time per function between the previous two sizes predicts more than %s.\n\n", len(names), len(all.Selected), budget)
	t := measure.NewTable(os.Stdout, "backend", "N", "selected", "attached", "select", "open", "open per added function", "close", "kernel memory", "peak RSS")
	var floors []floorRow
	for _, b := range backends {
		var p predictor
		for _, n := range sizes {
			if err := ctx.Err(); err != nil {
				return err
			}
			label, patterns, want := sizeLabel(n), allPatterns, len(all.Selected)
			if n != allFunctions {
				patterns, want = []string{patternFor(pick(names, n))}, min(n, len(names))
			}
			if est := p.estimate(want); est > budget {
				t.Row(b, label, fmt.Sprint(want), "", "", "not run: about "+round(est).String()+" predicted")
				continue
			}
			profile := ""
			if profileDir != "" {
				profile = filepath.Join(profileDir, b+"-"+label)
			}
			r, err := attachOnce(ctx, cat, b, patterns, profile)
			if err != nil && notSupported(err) && p.perFunc == 0 {
				t.Row(b, "", "", "", "", "not supported by this kernel ("+oneLine(err)+")")
				break
			}
			if err != nil {
				t.Row(b, label, fmt.Sprint(r.selected), "", "", "error: "+oneLine(err))
				fmt.Fprintf(os.Stderr, "trawl-bench: %s N=%s: %v\n", b, label, err)
				break
			}
			p.add(r.attached, r.open)
			t.Row(b, label, fmt.Sprint(r.selected), fmt.Sprint(r.attached), round(r.sel).String(), round(r.open).String(), round(p.perFunc).String(), round(r.close).String(), megabytes(r.kernelMem), megabytes(r.peakRSS))
			fmt.Fprintf(os.Stderr, "trawl-bench: %s N=%s: open %s (%s), close %s, %d attached, peak RSS %s\n", b, label, round(r.open), r.steps, round(r.close), r.attached, megabytes(r.peakRSS))
			for _, line := range r.skipped.Summary(3) {
				fmt.Fprintf(os.Stderr, "trawl-bench: %s N=%s: skipped %s\n", b, label, line)
			}
			if n == allFunctions && hasFloor(b) {
				floors = append(floors, benchFloor(ctx, cat, b, r, floorRounds, command))
			}
		}
	}
	t.End()
	printFloor(floors)
	return nil
}

// oneLine keeps an error's first line, short enough for a table cell.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

// resetPeakRSS returns what the garbage collector can to the system and
// resets the process's peak resident memory (VmHWM) to its current
// resident memory (clear_refs, Linux 4.0), so that peakRSS then tells the
// peak of what runs in between.
func resetPeakRSS() error {
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns the peak resident memory (VmHWM) of process pid
// ("self": this one), in bytes.
func peakRSS(pid string) (int64, error) {
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("read VmHWM %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%s/status", pid)
}

// startCPUProfile starts profiling the CPU into prefix-cpu.pprof, and
// returns the function that stops it. An empty prefix profiles nothing.
func startCPUProfile(prefix string) (stop func() error, err error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(prefix + "-cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// writeHeapProfile writes the heap profile of the live objects into file
// (go tool pprof reads it).
func writeHeapProfile(file string) error {
	runtime.GC()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
