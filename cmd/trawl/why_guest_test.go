// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// opensArg as the first argument makes the test binary open each of the
// other arguments, and close it if the open succeeds.
const opensArg = "__opens"

func opens(paths []string) {
	for _, p := range paths {
		if f, err := os.Open(p); err == nil {
			f.Close()
		}
	}
}

// opensLingerArg is opensArg, then a wait of lingerTime before the exit.
const opensLingerArg = "__opens_linger"

// lingerTime is how long the opensLingerArg command waits after its
// opens: what a trace of thousands of calls needs to read them while the
// command runs, on a busy host under emulation. (The command's exit stops
// the trace, which then reads what is left for half a second at most.)
const lingerTime = 10 * time.Second

// jsonCall is a call as --json writes it, the fields these tests read.
type jsonCall struct {
	TS       uint64          `json:"ts"`
	PID      uint32          `json:"pid"`
	TID      uint32          `json:"tid"`
	Comm     string          `json:"comm"`
	Func     string          `json:"func"`
	Kind     string          `json:"kind"`
	Args     json.RawMessage `json:"args"`
	Show     json.RawMessage `json:"show"`
	Ret      json.RawMessage `json:"ret"`
	Errno    string          `json:"errno"`
	Duration uint64          `json:"duration_ns"`
	Depth    int             `json:"depth"`
	Chain    uint32          `json:"chain"`
	Origin   bool            `json:"origin"`
	Stack    []string        `json:"stack"`
	UStack   []string        `json:"ustack"`
}

// parseCalls parses --json output, failing the test on a bad line.
func parseCalls(t *testing.T, out string) []jsonCall {
	t.Helper()
	var calls []jsonCall
	for line := range strings.Lines(out) {
		var c jsonCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("not a JSON call: %q: %v", line, err)
		}
		calls = append(calls, c)
	}
	return calls
}

// filename returns the filename argument of a do_sys_openat2 call.
func (c *jsonCall) filename() string {
	var args struct{ Filename string }
	json.Unmarshal(c.Args, &args)
	return args.Filename
}

// openEntry is the entry function of the chain tests: the open system
// calls end in it.
const openEntry = "do_sys_openat2"

// pathWalk selects functions of the path walk under do_sys_openat2 (the
// first is do_file_open from 7.0) that return an error when an open fails.
const pathWalk = "/^(do_filp_open|do_file_open|path_openat|link_path_walk|lookup_fast|lookup_open|path_lookupat)$/"

// TestWhyFailed traces opens that fail, and one that does not, with
// --entry --errors --stack, with each backend: an open under a regular
// file fails with ENOTDIR, of a missing file with ENOENT. Each gives one
// error chain, the entry and deeper calls, all failing, with exactly one
// origin; the open that succeeds gives none. Each call's stack passes
// through the system call entry and starts at the call's function. With
// --min-duration, longer than any open, no chain comes.
func TestWhyFailed(t *testing.T) {
	guest.Require(t)
	skipWithoutPrototype(t, openEntry)
	exe := os.Args[0]
	notDir, missing := filepath.Join(exe, "x"), "/trawl-missing-file"
	for _, b := range backendsHere(t) {
		t.Run(b, func(t *testing.T) {
			// --debug: the summary names every program, with its
			// recursion misses, even none.
			cmd := trawlCmd("-q", "--debug", "--json", "-b", b, "--entry", openEntry, "--errors", "--stack", pathWalk,
				"--", exe, opensArg, notDir, missing, exe)
			out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			if b == "fsession" && !strings.Contains(stderr, "fexit_capture") {
				// With --entry, fsession attaches fentry's programs, whose
				// exit returns at once for a call outside the entry calls.
				t.Errorf("fsession with --entry attached no fexit program:\n%s", stderr)
			}
			chains := map[uint32][]jsonCall{}
			for _, c := range parseCalls(t, out) {
				if c.Chain == 0 {
					t.Errorf("a call outside chains: %+v", c)
				}
				chains[c.Chain] = append(chains[c.Chain], c)
			}
			seen := map[string]bool{}
			for id, chain := range chains {
				entry := chain[len(chain)-1]
				if entry.Func != openEntry || entry.Depth != 0 {
					t.Errorf("chain %d does not end in its entry call: %+v", id, chain)
					continue
				}
				name := entry.filename()
				seen[name] = true
				origins := 0
				for _, c := range chain {
					if c.Errno == "" && string(c.Ret) != "0" {
						t.Errorf("chain %d of %s: %s did not fail: ret %s", id, name, c.Func, c.Ret)
					}
					if c.Origin {
						origins++
					}
					if b == "kprobe" && len(c.Stack) > 0 && strings.HasPrefix(c.Stack[len(c.Stack)-1], "kretprobe_trampoline+") {
						// Before 5.14 the x86-64 unwinder stops at a return
						// address a kretprobe replaced (5.10: "path_openat+0x1",
						// "do_filp_open+0x99", "kretprobe_trampoline+0x0").
						t.Logf("chain %d of %s: the stack of %s stops at a kretprobe, as the kernel's unwinder does before 5.14: %q", id, name, c.Func, c.Stack)
					} else if !slices.ContainsFunc(c.Stack, isSyscallEntry) || slices.ContainsFunc(c.Stack, isBPF) {
						t.Errorf("chain %d of %s: the stack of %s does not pass through the system call entry, or has BPF frames: %q", id, name, c.Func, c.Stack)
					}
					if len(c.Stack) == 0 || !strings.HasPrefix(c.Stack[0], c.Func+"+") {
						t.Errorf("chain %d of %s: the stack of %s does not start at %[3]s: %q", id, name, c.Func, c.Stack)
					}
				}
				if origins != 1 {
					t.Errorf("chain %d of %s: %d origins:\n%s", id, name, origins, out)
				}
				want := map[string]string{notDir: "ENOTDIR", missing: "ENOENT"}[name]
				if want == "" {
					continue
				}
				if entry.Errno != want || len(chain) < 2 {
					t.Errorf("chain %d of %s: want %s from the entry and deeper calls, got:\n%+v", id, name, want, chain)
				}
			}
			for _, name := range []string{notDir, missing} {
				if !seen[name] {
					t.Errorf("no error chain of %s:\n%s\n%s", name, out, stderr)
				}
			}
			if seen[exe] {
				t.Errorf("an error chain of %s, which opens:\n%s", exe, out)
			}
			if !strings.Contains(stderr, "error chains") {
				t.Errorf("no chain counts in the summary:\n%s", stderr)
			}
		})
	}
	// --min-duration applies to the entry call: no open takes an hour.
	cmd := trawlCmd("-q", "--json", "--entry", openEntry, "--errors", "--min-duration", "1h", pathWalk,
		"--", exe, opensArg, notDir, missing)
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 || out != "" || !strings.Contains(stderr, " 0 error chains") {
		t.Errorf("--min-duration 1h: status %d, want no chain:\n%s\n%s", status, out, stderr)
	}
}

// isSyscallEntry says whether a stack frame is in the system call entry
// of x86-64 or arm64.
func isSyscallEntry(frame string) bool {
	return strings.HasPrefix(frame, "do_syscall_64+") || strings.HasPrefix(frame, "el0_svc")
}

// isBPF says whether a stack frame is of a BPF program or trampoline.
func isBPF(frame string) bool { return strings.HasSuffix(frame, " [bpf]") }

// staleGates matches the summary's count of entry calls whose exit was
// missed.
var staleGates = regexp.MustCompile(`trawl: --entry: (\d+) entry calls whose exit was missed`)

// TestEntryGraph traces every function inside calls of do_sys_openat2
// (graph tracing): each call is nested in a call of it, on the same task,
// of the traced command. Thousands of calls come, the entry calls last
// (they end after their nested calls): the command waits after its opens
// so that the trace reads them before its exit stops the trace.
func TestEntryGraph(t *testing.T) {
	guest.Require(t)
	if k := guest.Kernel(); k != "amd64-7.3" {
		t.Skipf("every function is attached on amd64-7.3 only, to keep make test within the CI budget; this is %s", k)
	}
	exe := os.Args[0]
	cmd := trawlCmd("-q", "--json", "--ring-buffer-size", "64M", "--entry", openEntry, "*", "--", exe, opensLingerArg, exe, "/trawl-missing-file")
	out, stderr, status := runLimited(t, cmd, 2*startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	calls := parseCalls(t, out)
	var entries []jsonCall
	for _, c := range calls {
		if c.Func == openEntry && c.Depth == 0 {
			entries = append(entries, c)
		}
	}
	// Calls come in the order they ended: those after a task's last entry
	// call ended inside one whose record the trace stopped before reading.
	lastEntry := map[uint32]int{}
	for i, c := range calls {
		if c.Func == openEntry && c.Depth == 0 {
			lastEntry[c.TID] = i
		}
	}
	comm := filepath.Base(exe)[:min(15, len(filepath.Base(exe)))]
	nested, outside := 0, 0
	for i, c := range calls {
		if c.Comm != comm {
			t.Errorf("a call of another task: %+v", c)
		}
		if c.Func == openEntry && c.Depth == 0 {
			continue
		}
		if last, ok := lastEntry[c.TID]; !ok || i > last {
			continue
		}
		inside := false
		for _, e := range entries {
			if e.TID == c.TID && e.TS <= c.TS && c.TS+c.Duration <= e.TS+e.Duration {
				inside = true
			}
		}
		if !inside {
			if outside++; outside <= 5 {
				t.Logf("a call outside every %s call: %+v", openEntry, c)
			}
		}
		nested++
	}
	// An entry call lost to a full ring buffer, not read when the
	// command's exit stopped the trace, or whose exit was missed (a
	// recursion miss: a run of the program that the exit interrupted, or
	// that was preempted on the same CPU, held its guard) leaves its
	// nested calls outside every entry read; the summary counts each.
	m := callsLine.FindStringSubmatch(stderr)
	if m == nil || m[2] == "" {
		t.Fatalf("no count of the calls in the summary:\n%s", stderr)
	}
	stale := staleGates.FindStringSubmatch(stderr)
	switch lost := m[3] != "0" || m[4] != "0" || stale != nil && stale[1] != "0"; {
	case outside > 0 && lost:
		t.Logf("%d of %d calls outside every %s call read, whose entry was among the calls lost:\n%s", outside, nested, openEntry, stderr)
	case outside > 0:
		t.Errorf("%d of %d calls outside every %s call, none lost; trawl said:\n%s", outside, nested, openEntry, stderr)
	}
	if len(entries) == 0 || nested == 0 {
		t.Errorf("%d calls of %s, %d calls inside them:\n%s", len(entries), openEntry, nested, stderr)
	}
	if !strings.Contains(stderr, "outside every entry call") {
		t.Errorf("no count of the calls outside in the summary:\n%s", stderr)
	}
	// Every function the kernel refuses is known before attaching (a
	// refusal fails a tracing_multi link as a whole).
	if strings.Contains(stderr, "rejected by the kernel (EINVAL)") {
		t.Errorf("the kernel refused functions trawl offered:\n%s", stderr)
	}
}

// skipWithoutPrototype skips the test when the kernel's BTF has no
// prototype of fn (arm64-5.10: do_sys_openat2), without which its
// arguments are raw registers: the chains cannot be told apart by the
// file name (TestFailedWithoutPrototype traces it there).
func skipWithoutPrototype(t *testing.T, fn string) {
	t.Helper()
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if fns := cat.Lookup(fn); len(fns) > 0 && fns[0].Proto() == nil {
		t.Skipf("kernel %s has no BTF prototype of %s (%s)", guest.Kernel(), fn, fns[0].ProtoNote)
	}
}

// TestWhyFailedInClone traces an open under a regular file with --entry
// --errors and the path walk's functions, link_path_walk's compiler clones
// among them: on kernels that have link_path_walk only as a clone
// (amd64-6.12: link_path_walk.part.0.constprop.0, whose return type is
// link_path_walk's int where BTF has it, else guessed), the ENOTDIR comes
// from the clone, which is the chain's origin.
func TestWhyFailedInClone(t *testing.T) {
	guest.Require(t)
	skipWithoutPrototype(t, openEntry)
	clone := traceableClone(t, "link_path_walk")
	// Without a kprobe link auto takes a trampoline, which cannot attach
	// a function without a BTF prototype.
	if !slices.ContainsFunc([]trawl.Backend{trawl.BackendKprobeSession, trawl.BackendKprobeMulti}, func(b trawl.Backend) bool {
		_, _, err := trawl.ChooseBackend(trawl.Config{Patterns: []string{hotFunc}, Backend: b})
		return err == nil
	}) {
		t.Skipf("kernel %s has no kprobe link to attach %s, which has no BTF prototype", guest.Kernel(), clone)
	}
	exe := os.Args[0]
	notDir := filepath.Join(exe, "x")
	cmd := trawlCmd("-q", "--json", "--entry", openEntry, "--errors", "do_f*_open", "path_openat", "link_path_walk*",
		"--", exe, opensArg, notDir)
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	var origin *jsonCall
	calls := parseCalls(t, out)
	for i, c := range calls {
		if c.Origin {
			origin = &calls[i]
		}
	}
	if origin == nil || origin.Func != clone || origin.Errno != "ENOTDIR" {
		t.Errorf("want the origin in %s failing with ENOTDIR, got %+v:\n%s\n%s", clone, origin, out, stderr)
	}
}

// traceableClone returns a traceable compiler clone of fn, skipping the
// test where there is none.
func traceableClone(t *testing.T, fn string) string {
	t.Helper()
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, f := range cat.Functions() {
		if f.Traceable && strings.HasPrefix(f.Name, fn+".") {
			return f.Name
		}
	}
	t.Skipf("kernel %s has no traceable compiler clone of %s", guest.Kernel(), fn)
	return ""
}

// TestFailedWithoutPrototype opens a missing file with do_sys_openat2
// traced where BTF has no prototype of it (arm64-5.10): its return
// register, read as a signed long, shows -ENOENT, and --errors keeps it.
func TestFailedWithoutPrototype(t *testing.T) {
	guest.Require(t)
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	fns := cat.Lookup(openEntry)
	release()
	if len(fns) == 0 || fns[0].HasProto() {
		t.Skipf("kernel %s has a BTF prototype of %s, or no such function", guest.Kernel(), openEntry)
	}
	exe := os.Args[0]
	missing := "/trawl-missing-file"
	cmd := trawlCmd("-q", "--json", "--errors", openEntry, "--", exe, opensArg, missing)
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	calls := parseCalls(t, out)
	if !slices.ContainsFunc(calls, func(c jsonCall) bool { return c.Func == openEntry && c.Errno == "ENOENT" }) {
		t.Errorf("no call of %s failing with ENOENT:\n%s\n%s", openEntry, out, stderr)
	}
}
