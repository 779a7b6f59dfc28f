// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// execTracepoint fires when a process has executed a new program.
const execTracepoint = "tp:sched:sched_process_exec"

// TestTracepointExec traces the command's exec with sched_process_exec:
// one event of the command's process, a tracepoint without duration or
// return value, whose named arguments --show reads: the program's file
// name.
func TestTracepointExec(t *testing.T) {
	guest.Require(t)
	exe := os.Args[0]
	show := execArgName(t) + "->filename"
	cmd := trawlCmd("-q", "--json", "--show", show, execTracepoint, "--", exe, opensArg, "/proc/version")
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	t.Logf("trace:\n%s", out)
	var events []jsonCall
	for _, c := range parseCalls(t, out) {
		if c.Func != execTracepoint {
			t.Errorf("a call of %s, not of %s", c.Func, execTracepoint)
		}
		events = append(events, c)
	}
	if len(events) != 1 {
		t.Fatalf("%d events of %s, want the command's one", len(events), execTracepoint)
	}
	e := events[0]
	if e.Kind != "tracepoint" || e.Duration != 0 || e.Ret != nil {
		t.Errorf("not an event: kind %q, duration %d, ret %s", e.Kind, e.Duration, e.Ret)
	}
	if want := `{` + strconv.Quote(show) + `:` + strconv.Quote(exe) + `}`; string(e.Show) != want {
		t.Errorf("shown %s, want %s", e.Show, want)
	}
}

// TestTracepointFilter filters the command's exec by its binprm's argc,
// 3 (the test binary, opensArg and a file): --filter argc == 3 keeps the
// event, argc == 4 leaves it out in the kernel.
func TestTracepointFilter(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "--filter on a tracepoint", "amd64-5.10", guest.SpareArm64)
	bprm := execArgName(t)
	for want, argc := range []int{4, 3} {
		cmd := trawlCmd("--json", "--filter", bprm+"->argc == "+strconv.Itoa(argc), execTracepoint, "--", os.Args[0], opensArg, "/proc/version")
		out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
		if status != 0 {
			t.Fatalf("status %d\n%s", status, stderr)
		}
		if got := len(parseCalls(t, out)); got != want {
			t.Errorf("argc == %d: %d events, want %d\n%s", argc, got, want, stderr)
		}
	}
}

// execArgName returns the name trawl gives sched_process_exec's binprm,
// its third argument: 5.10's BTF does not name the arguments.
func execArgName(t *testing.T) string {
	t.Helper()
	list, stderr, status := runLimited(t, trawlCmd("list", "--json", execTracepoint), startLimit)
	var listed struct{ Functions []jsonFunc }
	if err := json.Unmarshal([]byte(list), &listed); status != 0 || err != nil || len(listed.Functions) != 1 || len(listed.Functions[0].Args) != 3 {
		t.Fatalf("trawl list %s: status %d, %v\n%s%s", execTracepoint, status, err, list, stderr)
	}
	bprm := listed.Functions[0].Args[2]
	if bprm.Type != "struct linux_binprm *" {
		t.Fatalf("third argument %+v, want the struct linux_binprm *", bprm)
	}
	return bprm.Name
}

// TestTracepointStats counts a tracepoint and a function together: the
// command's exec and its opens.
func TestTracepointStats(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "--stats of tracepoints and functions", "amd64-5.10", guest.SpareArm64)
	const opens = 3
	cmd := trawlCmd(append([]string{"-q", "--stats", execTracepoint, "do_sys_openat2", "--", os.Args[0], opensArg},
		slices.Repeat([]string{"/proc/version"}, opens)...)...)
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	calls := map[string]uint64{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) >= 2 {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				calls[f[0]] = n
			}
		}
	}
	if calls[execTracepoint] != 1 {
		t.Errorf("%d events of %s, want 1\n%s", calls[execTracepoint], execTracepoint, out)
	}
	if calls["do_sys_openat2"] < opens {
		t.Errorf("%d calls of do_sys_openat2, want at least %d\n%s", calls["do_sys_openat2"], opens, out)
	}
}

// TestTracepointGlob attaches every tracepoint of sched, system-wide:
// several of them fire while the command runs.
func TestTracepointGlob(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "a glob of tracepoints", "amd64-5.10", guest.SpareArm64)
	cmd := trawlCmd("--json", "tp:sched:*", "--", os.Args[0], opensArg, "/proc/version")
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	t.Logf("stderr:\n%s", stderr)
	fired := map[string]int{}
	for _, c := range parseCalls(t, out) {
		if !strings.HasPrefix(c.Func, "tp:sched:") || c.Kind != "tracepoint" {
			t.Errorf("not an event of sched: %+v", c)
		}
		fired[c.Func]++
	}
	if len(fired) < 2 {
		t.Errorf("events of %d tracepoints of sched, want several: %v", len(fired), fired)
	}
	t.Logf("events: %v", fired)
}

// allocTracepoint fires at each allocation from a slab cache, as opening
// a file makes (its name, its struct file).
const allocTracepoint = "tp:kmem:kmem_cache_alloc"

// TestTracepointEntryStack traces slab allocations only inside the
// command's do_sys_openat2 calls (--entry), with their kernel stacks:
// every event happened within an open of its task, one level deeper, and
// its stack, which starts at the allocator, not at the code running the
// tracepoint's programs, goes through do_sys_openat2.
func TestTracepointEntryStack(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "--entry and --stack with a tracepoint", "amd64-7.3", "amd64-5.10")
	cmd := trawlCmd("-q", "--json", "--stack", "--entry", "do_sys_openat2", allocTracepoint, "--", os.Args[0], opensArg, "/proc/version", "/proc/version")
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	var opens, events []jsonCall
	for _, c := range parseCalls(t, out) {
		switch c.Func {
		case "do_sys_openat2":
			opens = append(opens, c)
		case allocTracepoint:
			events = append(events, c)
		default:
			t.Errorf("a call of %s", c.Func)
		}
	}
	if len(opens) < 2 || len(events) == 0 {
		t.Fatalf("%d opens and %d events, want 2 or more and some\n%s", len(opens), len(events), out)
	}
	for _, e := range events {
		inside := slices.ContainsFunc(opens, func(o jsonCall) bool {
			return o.TID == e.TID && o.TS <= e.TS && e.TS <= o.TS+o.Duration && e.Depth == o.Depth+1
		})
		if !inside {
			t.Errorf("an event outside the opens, or not one level deeper: %+v", e)
		}
		if len(e.Stack) == 0 || tracepointRunner(e.Stack[0]) || !slices.ContainsFunc(e.Stack, func(f string) bool { return strings.HasPrefix(f, "do_sys_openat2+") }) {
			t.Errorf("stack %q, want one from the allocator through do_sys_openat2", e.Stack)
		}
	}
	t.Logf("%d events in %d opens; a stack: %q", len(events), len(opens), events[0].Stack)
}

// tracepointRunner says whether a stack frame is of the code that runs a
// tracepoint's programs.
func tracepointRunner(frame string) bool {
	return strings.HasPrefix(frame, "bpf_trace_run") || strings.HasPrefix(frame, "__bpf_trace_") || strings.HasPrefix(frame, "__traceiter_")
}

// TestTracepointTree draws the events of a tracepoint inside the call
// they happened in: a line without duration, indented one level deeper
// than the do_sys_openat2 above it.
func TestTracepointTree(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "the tree with a tracepoint", "amd64-7.3", "amd64-5.10")
	cmd := trawlCmd("-q", "-f", "tree", "--entry", "do_sys_openat2", allocTracepoint, "--", os.Args[0], opensArg, "/proc/version")
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	t.Logf("tree:\n%s", out)
	// A call line is a duration column of 10, two spaces, two more per
	// level of depth, then the call.
	callLine := regexp.MustCompile(`^( {0,9}\S+| {10})  ((?:  )*)(\S+?)\(`)
	events, parent := 0, -1
	for line := range strings.Lines(out) {
		m := callLine.FindStringSubmatch(line)
		if m == nil {
			continue // a task's header
		}
		depth := len(m[2]) / 2
		switch m[3] {
		case "do_sys_openat2":
			parent = depth
		case allocTracepoint:
			events++
			if parent < 0 || depth != parent+1 || strings.TrimSpace(m[1]) != "" || strings.Contains(line, ") = ") {
				t.Errorf("an event not one level inside do_sys_openat2 (depth %d), or with a duration or a return value: %q", parent, line)
			}
		}
	}
	if events == 0 {
		t.Errorf("no event of %s in the tree", allocTracepoint)
	}
}

// TestTracepointTrack tracks the skb of a UDP datagram sent to a closed
// port on loopback from ip_send_skb: kfree_skb's event, where the kernel
// drops it for want of a socket, joins its journey, with its drop reason
// by name where the tracepoint has one (5.17 and later).
func TestTracepointTrack(t *testing.T) {
	guest.Require(t)
	// A kprobe link attaches the free functions --track adds at once,
	// where trampolines load a program for each.
	b := trackBackends(t, false)[0]
	const drop = "tp:skb:kfree_skb"
	reason := ""
	list, stderr, status := runLimited(t, trawlCmd("list", "--json", drop), startLimit)
	var listed struct{ Functions []jsonFunc }
	if err := json.Unmarshal([]byte(list), &listed); status != 0 || err != nil || len(listed.Functions) != 1 {
		t.Fatalf("trawl list %s: status %d, %v\n%s%s", drop, status, err, list, stderr)
	}
	for _, a := range listed.Functions[0].Args {
		if a.Type == "enum skb_drop_reason" {
			reason = a.Name
		}
	}
	cmd := trawlCmd("-q", "--json", "-b", b, "--track", "struct sk_buff *", "ip_send_skb", drop, "--", os.Args[0], udpSendArg)
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	t.Logf("trace:\n%s", out)
	starts := map[string]bool{}
	for id, calls := range journeysOf(t, out) {
		starts[id] = calls[0].Func == "ip_send_skb"
	}
	found := false
	for line := range strings.Lines(out) {
		var c struct {
			Func, Track string
			Args        map[string]json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		if c.Func != drop || !starts[c.Track] {
			continue
		}
		found = true
		if got := string(c.Args[reason]); reason != "" && got != `"SKB_DROP_REASON_NO_SOCKET"` {
			t.Errorf("drop reason %s, want SKB_DROP_REASON_NO_SOCKET by name", got)
		}
	}
	if !found {
		t.Errorf("no event of %s in the journey of ip_send_skb's skb", drop)
	}
	if reason == "" {
		t.Logf("%s has no drop reason on %s: the event joined the journey", drop, guest.Kernel())
	}
}

// TestRecordsWholeUnderInterrupts traces the whole system for eight
// seconds with every tracepoint and getppid attached, while a loop calls
// getppid, whose records hold the task's registers: interrupts fire
// tracepoints on tasks whose calls' records are being sent, and none of
// those records may be overwritten by the interrupt's call (a record cut
// short by it does not decode; on amd64-7.3 a few in each run did, before
// an exit kept its depth until its record was sent).
func TestRecordsWholeUnderInterrupts(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "every tracepoint under a getppid loop", "amd64-7.3", "arm64-7.3")
	startHotloop(t)
	out := filepath.Join(t.TempDir(), "trace.json")
	cmd := trawlCmd("--json", "-o", out, "-d", "8s", "tp:*", hotFunc)
	_, stderr, status := runLimited(t, cmd, 2*startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	t.Logf("summary:\n%s", stderr)
	if strings.Contains(stderr, "did not decode") {
		t.Errorf("records that did not decode:\n%s", stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	getppids := 0
	for _, c := range parseCalls(t, string(data)) {
		if strings.HasSuffix(c.Func, "sys_getppid") {
			getppids++
		}
	}
	if getppids == 0 {
		t.Errorf("no getppid call recorded\n%s", stderr)
	}
}
