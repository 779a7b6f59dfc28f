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
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/cmd/trawl-bench/measure"
	"github.com/trawl-dev/trawl/internal/kernel"
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
// attached. trawl is measured twice: trawl.Open in this process, whose
// catalogue is loaded, and the trawl command beside this one, which pays
// its whole start as bpftrace does. Each measurement runs rounds times in
// a row and the fastest run counts.
func benchVersusBpftrace(ctx context.Context, cat *kernel.Catalogue, names []string, sizes []int, budget time.Duration, rounds int) error {
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
	command, commandErr := trawlCommand()
	if commandErr == nil {
		// As bpftrace --version above: the first run of a binary reads
		// it from the host's share, which is no part of its start.
		if err := exec.CommandContext(ctx, command, "--version").Run(); err != nil {
			commandErr = fmt.Errorf("trawl --version: %w", err)
		}
	}
	fmt.Printf("trawl.Open with the fentry backend on N functions picked evenly from the %d functions of the attach bench that have at most %d arguments (%s leaves functions with more out of kfunc probes on %s), then Close; the trawl command (`trawl --backend fentry NAME...`, tracing the whole system) on the same functions, from its start until it says it is tracing (armed) and from an interrupt then until it exits; then %s on the functions trawl attached, once with a kfunc (fentry) probe on each, once with a kfunc and a kretfunc (fexit) probe on each, as many programs and trampolines as trawl's fentry and fexit pair. Every probe is `{ @[probe] = count(); }` (one program per probe), with `BEGIN { exit(); }`. bpftrace open: from its start until it says every probe is attached; close: from then until it exits. trawl.Open does not load the catalogue, which this bench did at its start; the command pays its whole start (catalogue, BTF, probes), as bpftrace does. ratio: bpftrace open / trawl open; command ratio: bpftrace open / trawl command open. Each measurement runs %d times, the commands in turns (one of each per round, so that a slow spell of the host falls on all alike), and the run with the shortest open time counts: host load only ever slows a run down.\n\n",
		len(fns), maxArgs, strings.TrimSpace(string(version)), runtime.GOARCH, strings.TrimSpace(string(version)), rounds)
	header := []string{"N", "functions", "trawl open", "trawl close", "trawl command open", "command close", "command, auto: backend", "open", "close"}
	for _, v := range bpftraceVariants {
		header = append(header, v.name+" open", "close", "ratio", "command ratio", "auto ratio")
	}
	t := measure.NewTable(os.Stdout, header...)
	// One predictor and one failure per column group: trawl, the trawl
	// command with fentry and with auto, then the bpftrace variants.
	preds := make([]predictor, 3+len(bpftraceVariants))
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
		// turns measures the columns rounds times each, one of each per
		// round (measure.Turns); the run with the shortest open time counts.
		turns := func(cols ...column) []measured {
			out := make([]measured, len(cols))
			var runnable []int
			var cases []func(int) (attachResult, error)
			for c, col := range cols {
				switch {
				case failed[col.slot] != "":
					out[c].why = "not run: failed at N=" + failed[col.slot]
				case preds[col.slot].estimate(len(set)) > budget:
					out[c].why = fmt.Sprintf("not run: about %s predicted", round(preds[col.slot].estimate(len(set))))
				default:
					runnable = append(runnable, c)
					cases = append(cases, func(int) (attachResult, error) {
						r, err := col.measure()
						if err != nil {
							fmt.Fprintf(os.Stderr, "trawl-bench: %s N=%s: %v\n", col.name, label, err)
						} else {
							fmt.Fprintf(os.Stderr, "trawl-bench: %s N=%s: open %s, close %s, %d attached\n", col.name, label, round(r.open), round(r.close), r.attached)
						}
						return r, err
					})
				}
			}
			runs, ctxErr := measure.Turns(ctx, rounds, cases)
			for j, c := range runnable {
				slot := cols[c].slot
				if err := cmp.Or(runs[j].Err, ctxErr); err != nil {
					failed[slot] = label
					out[c].why = "error: " + oneLine(err)
					continue
				}
				out[c].r = measure.Fastest(runs[j].Results, func(r attachResult) time.Duration { return r.open })
				preds[slot].add(out[c].r.attached, out[c].r.open)
			}
			return out
		}
		trawlRun := turns(column{0, "trawl fentry", func() (attachResult, error) {
			return attachOnce(ctx, cat, string(trawl.BackendFentry), []string{patternFor(set)}, "")
		}})[0]
		var skipped []string
		for reason, fns := range trawlRun.r.skipped {
			skipped = append(skipped, fns...)
			notes = append(notes, fmt.Sprintf("N=%s: trawl left out %s: %s.", label, strings.Join(fns, ", "), reason))
		}
		attached := slices.DeleteFunc(slices.Clone(set), func(fn string) bool { return slices.Contains(skipped, fn) })
		var autoBackend string
		cols := []column{
			{1, "trawl command", func() (attachResult, error) {
				r, _, err := trawlCommandOnce(ctx, command, string(trawl.BackendFentry), attached, false, false)
				return r, err
			}},
			{2, "trawl command auto", func() (r attachResult, err error) {
				r, autoBackend, err = trawlCommandOnce(ctx, command, string(trawl.BackendAuto), attached, false, false)
				return r, err
			}},
		}
		if commandErr != nil {
			cols = cols[:0]
		}
		for i, v := range bpftraceVariants {
			cols = append(cols, column{i + 3, v.name, func() (attachResult, error) {
				return bpftraceOnce(ctx, cmd, kfuncProbes(v.providers, attached), len(attached))
			}})
		}
		got := turns(cols...)
		var commandRun, autoRun measured
		if commandErr != nil {
			commandRun.why, autoRun.why = oneLine(commandErr), oneLine(commandErr)
		} else {
			commandRun, autoRun, got = got[0], got[1], got[2:]
		}
		row := slices.Concat([]string{label, fmt.Sprint(len(attached))}, cells(trawlRun), cells(commandRun), []string{autoBackend}, cells(autoRun))
		for _, m := range got {
			row = append(row, bpftraceCells(m, trawlRun, commandRun, autoRun)...)
		}
		t.Row(row...)
	}
	t.End()
	if len(notes) > 0 {
		slices.Sort(notes)
		fmt.Printf("%s\n\n", strings.Join(notes, " "))
	}
	return nil
}

// column is a measurement of the comparison: slot is its predictor's and
// failure's index.
type column struct {
	slot    int
	name    string
	measure func() (attachResult, error)
}

// cells formats an open and a close time, or says why there are none.
func cells(m measured) []string {
	if m.why != "" {
		return []string{m.why, ""}
	}
	return []string{round(m.r.open).String(), round(m.r.close).String()}
}

// bpftraceCells formats bpftrace's open and close times and the ratios of
// its open time to those of trawl.Open and of the trawl commands.
func bpftraceCells(m measured, trawls ...measured) []string {
	out := cells(m)
	for _, t := range trawls {
		ratio := ""
		if m.why == "" && t.why == "" {
			ratio = measure.Times(m.r.open.Seconds() / t.r.open.Seconds())
		}
		out = append(out, ratio)
	}
	return out
}

// trawlCommand returns the path of the trawl command built for this
// machine: beside this bench, or in bin/ of the working directory (make
// bench builds both into bin/ and runs the bench from the repository,
// which the guest shares).
func trawlCommand() (string, error) {
	name := "trawl-" + runtime.GOARCH
	var paths []string
	if self, err := os.Executable(); err == nil {
		paths = append(paths, filepath.Join(filepath.Dir(self), name))
	}
	paths = append(paths, filepath.Join("bin", name))
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no trawl command at %s", strings.Join(paths, " or "))
}

// trawlCommandOnce runs the trawl command on fns with a backend, tracing
// the whole system, and times it as bpftraceOnce times bpftrace: open from
// its start until it says it is tracing (armed), close from an interrupt
// then until it exits. It returns the backend the command says it uses.
// With debug, the command runs with --debug and r.steps are the steps it
// logs, the catalogue's load first.
func trawlCommandOnce(ctx context.Context, command, backend string, fns []string, debug, stats bool) (r attachResult, used string, err error) {
	r.selected = len(fns)
	args := []string{"--backend", backend}
	if debug {
		args = append(args, "--debug")
	}
	if stats {
		args = append(args, "--stats")
	}
	c := exec.CommandContext(ctx, command, append(args, fns...)...)
	stderr, err := c.StderrPipe()
	if err != nil {
		return r, "", err
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return r, "", fmt.Errorf("start trawl: %w", err)
	}
	waited := false
	defer func() {
		if !waited {
			c.Process.Kill()
			c.Wait()
		}
	}()
	var interrupted time.Time
	var messages []string
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		line := lines.Text()
		if r.open == 0 && strings.HasPrefix(line, "trawl: tracing ") {
			r.open = time.Since(start)
			r.peakRSS = -1
			if rss, err := peakRSS(strconv.Itoa(c.Process.Pid)); err == nil {
				r.peakRSS = rss
			}
			if _, err := fmt.Sscanf(line, "trawl: tracing %d functions with %s", &r.attached, &used); err != nil {
				return r, "", fmt.Errorf("trawl's tracing line: %q: %w", line, err)
			}
			interrupted = time.Now()
			if err := c.Process.Signal(os.Interrupt); err != nil {
				return r, "", fmt.Errorf("interrupt trawl: %w", err)
			}
			continue
		}
		if step, ok := loggedStep(line); ok {
			r.steps = strings.TrimPrefix(r.steps+", "+step, ", ")
			continue
		}
		if step, took, ok := stopStep(line); ok {
			r.stopSteps = strings.TrimPrefix(r.stopSteps+", "+step+" "+round(took).String(), ", ")
			if step == "output" {
				r.output = took
			}
			continue
		}
		messages = append(messages, line)
	}
	err, waited = c.Wait(), true
	if r.open == 0 {
		return r, "", fmt.Errorf("trawl did not start tracing (%v): %s", err, strings.Join(messages, " / "))
	}
	if err != nil {
		return r, "", fmt.Errorf("trawl failed after an interrupt (%w): %s", err, strings.Join(messages, " / "))
	}
	r.close = time.Since(interrupted)
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss * 1024
	}
	return r, used, nil
}

// loggedStep returns, from a line `trawl --debug` logs, the catalogue's
// load or an open step as "NAME TIME".
func loggedStep(line string) (string, bool) {
	field := func(key string) string {
		_, v, _ := strings.Cut(line, " "+key+"=")
		v, _, _ = strings.Cut(v, " ")
		return v
	}
	switch {
	case strings.Contains(line, `msg="catalogue loaded"`):
		return "catalogue " + field("took"), true
	case strings.Contains(line, `msg="open step"`):
		return field("step") + " " + field("took"), true
	}
	return "", false
}

// stopStep returns, from a line `trawl --debug` logs, a step of the
// command's stop (drain, output, close) and how long it took.
func stopStep(line string) (string, time.Duration, bool) {
	if !strings.Contains(line, `msg="stop step"`) {
		return "", 0, false
	}
	_, step, _ := strings.Cut(line, " step=")
	step, _, _ = strings.Cut(step, " ")
	_, took, _ := strings.Cut(line, " took=")
	took, _, _ = strings.Cut(took, " ")
	d, err := time.ParseDuration(took)
	return step, d, err == nil
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

// kfuncProbes returns bpftrace's probes of each provider on every
// function in fns, provider by provider.
func kfuncProbes(providers, fns []string) []string {
	var probes []string
	for _, prov := range providers {
		for _, fn := range fns {
			probes = append(probes, prov+":vmlinux:"+fn)
		}
	}
	return probes
}

// bpftraceOnce runs bpftrace with probes on the units (functions or
// tracepoints) the caller counts as attached, each probe counting its
// calls in a map keyed by probe name (which makes bpftrace build one
// program per probe), and a BEGIN probe that exits. bpftrace fires BEGIN,
// attaches every other probe, then sees the exit and detaches them: open
// is the time from its start until it says its probes are attached, close
// the time from then until it exits.
func bpftraceOnce(ctx context.Context, cmd, probes []string, units int) (attachResult, error) {
	r := attachResult{selected: units}
	script := "BEGIN { exit(); }\n" + strings.Join(probes, ",\n") + "\n{ @[probe] = count(); }\n"
	f, err := os.CreateTemp("", "trawl-bench-*.bt")
	if err != nil {
		return r, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return r, err
	}
	if err := f.Close(); err != nil {
		return r, err
	}

	c := exec.CommandContext(ctx, cmd[0], append(slices.Clone(cmd[1:]), f.Name())...)
	// bpftrace refuses more than 512 probes or programs unless told.
	limit := fmt.Sprint(max(512, len(probes)+1))
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
	var n int
	if _, err := fmt.Sscanf(stdout.String(), "Attaching %d probes", &n); err != nil {
		return r, fmt.Errorf("bpftrace's output does not start with the number of probes: %q", firstLine(stdout.String()))
	}
	if want := len(probes) + 1; n != want {
		return r, fmt.Errorf("bpftrace attached %d probes, want %d", n, want)
	}
	r.attached = units
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
