// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
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
