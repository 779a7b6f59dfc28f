// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// bpftraceVariant is one bpftrace script measured against trawl's fentry
// backend: a kfunc (fentry) probe on every function, or a kfunc and a
// kretfunc (fexit) probe, which is as many programs and trampolines as
// trawl's fentry and fexit pair.
type bpftraceVariant struct {
	name      string
	providers []string
}

// bpftraceVariants are measured in this order. bpftrace 0.17, Debian 12's,
// spells fentry and fexit kfunc and kretfunc.
var bpftraceVariants = []bpftraceVariant{
	{"bpftrace fentry", []string{"kfunc"}},
	{"bpftrace fentry+fexit", []string{"kfunc", "kretfunc"}},
}

// notifyAttached is the line bpftrace writes on stderr once every probe is
// attached when the environment has it (bpftrace's runtime tests use it).
const notifyAttached = "__BPFTRACE_NOTIFY_PROBES_ATTACHED"

// bpftraceMaxArgs is, per arch, the most arguments a function may have for
// bpftrace 0.17 to put a kfunc probe on it (its argument registers).
var bpftraceMaxArgs = map[string]int{"amd64": 6, "arm64": 8}

// measured is one cell group of the comparison table: a measurement, or
// why there is none.
type measured struct {
	r   attachResult
	why string
}

// benchVersusBpftrace measures, for each size, trawl's fentry backend and
// then each bpftrace variant on the same functions, and prints the table.
// names are the attach bench's functions; those with more arguments than
// bpftrace takes are left out, and bpftrace gets the functions trawl
// attached. load is how long loading the catalogue took, which trawl.Open
// does not pay again in this process but a trawl command pays once. Each
// measurement runs rounds times in a row and the fastest run counts.
func benchVersusBpftrace(ctx context.Context, cat *kernel.Catalogue, load time.Duration, names []string, sizes []int, budget time.Duration, rounds int) error {
	fmt.Printf("### fentry vs bpftrace\n\n")
	cmd, err := guest.Bpftrace()
	if err == nil {
		_, err = os.Stat(cmd[0])
	}
	if err != nil {
		fmt.Printf("bpftrace is not available in this guest: %s.\n\n", oneLine(err))
		return nil
	}
	version, err := exec.CommandContext(ctx, cmd[0], append(slices.Clone(cmd[1:]), "--version")...).Output()
	if err != nil {
		fmt.Printf("bpftrace does not run in this guest: %s.\n\n", oneLine(err))
		return nil
	}
	maxArgs := bpftraceMaxArgs[runtime.GOARCH]
	fns := fewArgs(cat, names, maxArgs)
	fmt.Printf("trawl.Open with the fentry backend on N functions picked evenly from the %d functions of the attach bench that have at most %d arguments (%s leaves functions with more out of kfunc probes on %s), then Close; then %s on the functions trawl attached, once with a kfunc (fentry) probe on each, once with a kfunc and a kretfunc (fexit) probe on each, as many programs and trampolines as trawl's fentry and fexit pair. Every probe is `{ @[probe] = count(); }` (one program per probe), with `BEGIN { exit(); }`. bpftrace open: from its start until it says every probe is attached; close: from then until it exits. trawl cold: trawl open plus loading the catalogue a trawl command on that pattern loads at its start, as bpftrace pays its own start: only the named functions' (all of them: %s in this guest). ratio: bpftrace open / trawl open; cold ratio: bpftrace open / trawl cold. Each measurement runs %d times in a row and the run with the shortest open time counts: host load only ever slows a run down.\n\n",
		len(fns), maxArgs, strings.TrimSpace(string(version)), runtime.GOARCH, strings.TrimSpace(string(version)), round(load), rounds)
	header, rule := "| N | functions | trawl open | trawl cold | trawl close", "|---|---|---|---|---"
	for _, v := range bpftraceVariants {
		header += fmt.Sprintf(" | %s open | close | ratio | cold ratio", v.name)
		rule += "|---|---|---|---"
	}
	fmt.Println(header + " |")
	fmt.Println(rule + "|")
	// One predictor and one failure per column group: trawl, then the
	// bpftrace variants.
	preds := make([]predictor, 1+len(bpftraceVariants))
	failed := make([]string, len(preds))
	// notes say which functions trawl left out, and why.
	var notes []string
	for _, n := range sizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		label, set := sizeLabel(n), fns
		if n != allFunctions {
			set = pick(fns, n)
		}
		load := coldLoad(patternFor(set), load)
		run := func(i int, name string, measure func() (attachResult, error)) measured {
			if failed[i] != "" {
				return measured{why: "not run: failed at N=" + failed[i]}
			}
			if est := preds[i].estimate(len(set)); est > budget {
				return measured{why: fmt.Sprintf("not run: about %s predicted", round(est))}
			}
			var best attachResult
			for k := range rounds {
				r, err := measure()
				if err != nil {
					failed[i] = label
					fmt.Fprintf(os.Stderr, "trawl-bench: %s N=%s: %v\n", name, label, err)
					return measured{why: "error: " + oneLine(err)}
				}
				fmt.Fprintf(os.Stderr, "trawl-bench: %s N=%s: open %s, close %s, %d attached\n", name, label, round(r.open), round(r.close), r.attached)
				if k == 0 || r.open < best.open {
					best = r
				}
			}
			preds[i].add(best.attached, best.open)
			return measured{r: best}
		}
		trawlRun := run(0, "trawl fentry", func() (attachResult, error) {
			return attachOnce(ctx, cat, trawl.BackendFentry, []string{patternFor(set)}, "")
		})
		var skipped []string
		for reason, fns := range trawlRun.r.skipped {
			skipped = append(skipped, fns...)
			notes = append(notes, fmt.Sprintf("N=%s: trawl left out %s: %s.", label, strings.Join(fns, ", "), reason))
		}
		attached := slices.DeleteFunc(slices.Clone(set), func(fn string) bool { return slices.Contains(skipped, fn) })
		row := fmt.Sprintf("| %s | %d | %s", label, len(attached), trawlCells(trawlRun, load))
		for i, v := range bpftraceVariants {
			m := run(i+1, v.name, func() (attachResult, error) { return bpftraceOnce(ctx, cmd, v.providers, attached) })
			row += " | " + bpftraceCells(m, trawlRun, load)
		}
		fmt.Println(row + " |")
	}
	fmt.Println()
	if len(notes) > 0 {
		slices.Sort(notes)
		fmt.Printf("%s\n\n", strings.Join(notes, " "))
	}
	return nil
}

// coldLoad is how long a trawl command on pattern loads its catalogue:
// only the named functions' when the pattern names each in full, as
// trawl.Open does (kernel.LoadNames), else every function's (full).
func coldLoad(pattern string, full time.Duration) time.Duration {
	names, ok := selector.LiteralNames([]string{pattern})
	if !ok {
		return full
	}
	start := time.Now()
	if _, err := kernel.LoadNames(os.DirFS("/"), names); err != nil {
		fmt.Fprintf(os.Stderr, "trawl-bench: load the catalogue of %d names: %v\n", len(names), err)
		return full
	}
	return time.Since(start)
}

// trawlCells formats trawl's open time, its cold open time (plus load,
// the catalogue's load time) and its close time.
func trawlCells(m measured, load time.Duration) string {
	if m.why != "" {
		return m.why + " | | "
	}
	return fmt.Sprintf("%s | %s | %s", round(m.r.open), round(m.r.open+load), round(m.r.close))
}

// bpftraceCells formats bpftrace's open and close times and the ratios of
// its open time to trawl's open and cold open times.
func bpftraceCells(m, trawl measured, load time.Duration) string {
	switch {
	case m.why != "":
		return m.why + " | | | "
	case trawl.why != "":
		return fmt.Sprintf("%s | %s | | ", round(m.r.open), round(m.r.close))
	}
	return fmt.Sprintf("%s | %s | %.2f | %.2f", round(m.r.open), round(m.r.close),
		m.r.open.Seconds()/trawl.r.open.Seconds(), m.r.open.Seconds()/(trawl.r.open+load).Seconds())
}

// fewArgs returns the names, in order, of vmlinux functions with at most
// maxArgs arguments.
func fewArgs(cat *kernel.Catalogue, names []string, maxArgs int) []string {
	args := map[string]int{}
	for _, fn := range cat.Functions() {
		if fn.Module != "" || fn.BTFID == 0 {
			continue
		}
		if proto, ok := fn.Proto().Type.(*btf.FuncProto); ok {
			args[fn.Name] = len(proto.Params)
		}
	}
	return slices.DeleteFunc(slices.Clone(names), func(name string) bool {
		n, ok := args[name]
		return !ok || n > maxArgs
	})
}

// bpftraceOnce runs bpftrace with a probe of each provider on every
// function in fns, each counting its calls in a map keyed by probe name
// (which makes bpftrace build one program per probe), and a BEGIN probe
// that exits. bpftrace fires BEGIN, attaches every other probe, then sees
// the exit and detaches them: open is the time from its start until it
// says its probes are attached, close the time from then until it exits.
func bpftraceOnce(ctx context.Context, cmd, providers, fns []string) (attachResult, error) {
	r := attachResult{selected: len(fns)}
	var script strings.Builder
	script.WriteString("BEGIN { exit(); }\n")
	for _, prov := range providers {
		for i, fn := range fns {
			sep := ",\n"
			if i == len(fns)-1 {
				sep = "\n{ @[probe] = count(); }\n"
			}
			fmt.Fprintf(&script, "%s:vmlinux:%s%s", prov, fn, sep)
		}
	}
	f, err := os.CreateTemp("", "trawl-bench-*.bt")
	if err != nil {
		return r, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script.String()); err != nil {
		f.Close()
		return r, err
	}
	if err := f.Close(); err != nil {
		return r, err
	}

	c := exec.CommandContext(ctx, cmd[0], append(slices.Clone(cmd[1:]), f.Name())...)
	// bpftrace refuses more than 512 probes or programs unless told.
	limit := fmt.Sprint(max(512, len(providers)*len(fns)+1))
	c.Env = append(os.Environ(), notifyAttached+"=1", "BPFTRACE_MAX_PROBES="+limit, "BPFTRACE_MAX_BPF_PROGS="+limit)
	var stdout bytes.Buffer
	c.Stdout = &stdout
	stderr, err := c.StderrPipe()
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return r, fmt.Errorf("start bpftrace: %w", err)
	}
	var attached time.Duration
	var messages []string
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if lines.Text() == notifyAttached && attached == 0 {
			attached = time.Since(start)
			continue
		}
		messages = append(messages, lines.Text())
	}
	err = c.Wait()
	total := time.Since(start)
	if err != nil {
		return r, fmt.Errorf("bpftrace failed (%w): %s", err, strings.Join(messages, " / "))
	}
	if attached == 0 {
		return r, fmt.Errorf("bpftrace exited without saying its probes were attached: %s", strings.Join(messages, " / "))
	}
	// "Attaching N probes...": N counts BEGIN. bpftrace stops at the first
	// probe it cannot attach, so having attached means attaching them all.
	var probes int
	if _, err := fmt.Sscanf(stdout.String(), "Attaching %d probes", &probes); err != nil {
		return r, fmt.Errorf("bpftrace's output does not start with the number of probes: %q", firstLine(stdout.String()))
	}
	if want := len(providers)*len(fns) + 1; probes != want {
		return r, fmt.Errorf("bpftrace attached %d probes, want %d", probes, want)
	}
	r.attached = len(fns)
	r.open, r.close = attached, total-attached
	return r, nil
}

// sizeLabel names a size in the tables.
func sizeLabel(n int) string {
	if n == allFunctions {
		return "all"
	}
	return fmt.Sprint(n)
}

// firstLine returns the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
