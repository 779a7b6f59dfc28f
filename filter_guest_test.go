// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// filterCase is one in-kernel filter: the workload's calls of fn must all
// be dropped in the kernel (no record reaches the ring buffer, and the
// filter's counter goes up), or some must pass, each satisfying check.
type filterCase struct {
	name    string
	cfg     func(cfg *trawl.Config)
	fn      string
	pass    bool
	check   func(c map[string]any) error
	counter func(st trawl.Stats) uint64
	setup   func(t *testing.T) // runs after attaching, before the workload
	// once: the filter reads no argument nor return value (the task, the
	// duration), the same code on every backend: run with the first
	// backend that can.
	once bool
}

func filtered(st trawl.Stats) uint64     { return st.Filtered }
func filteredExpr(st trawl.Stats) uint64 { return st.FilteredExpr }
func filteredExit(st trawl.Stats) uint64 { return st.FilteredExit }

func TestFilters(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "the filters (trampolines and kprobes, both architectures)", "amd64-5.10", guest.SpareArm64)
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	dropFn := "sk_skb_reason_drop"
	if len(cat.Lookup(dropFn)) == 0 {
		dropFn = "kfree_skb_reason"
	}
	cgroup := testCgroup(t)
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	filter := func(expr string) func(*trawl.Config) {
		return func(cfg *trawl.Config) { cfg.Filter = expr }
	}
	isOpenPath := func(c map[string]any) error { return wantArg(c, "filename", openPath) }
	cases := []filterCase{
		{once: true, name: "comm/pass", fn: "bpf_fentry_test1", pass: true, cfg: func(cfg *trawl.Config) { cfg.Comm = strings.TrimSpace(string(comm)) }},
		{once: true, name: "comm/reject", fn: "bpf_fentry_test1", counter: filtered, cfg: func(cfg *trawl.Config) { cfg.Comm = "no-such-task" }},
		{once: true, name: "cgroup/reject", fn: "bpf_fentry_test1", counter: filtered, cfg: func(cfg *trawl.Config) { cfg.Cgroup = cgroup }},
		{once: true, name: "cgroup/pass", fn: "bpf_fentry_test1", pass: true, cfg: func(cfg *trawl.Config) { cfg.Cgroup = cgroup },
			setup: func(t *testing.T) { enterCgroup(t, cgroup) }},
		{once: true, name: "cgroup/descendant", fn: "bpf_fentry_test1", pass: true, cfg: func(cfg *trawl.Config) { cfg.Cgroup = cgroup },
			setup: func(t *testing.T) { enterCgroup(t, childCgroup(t, cgroup)) }},
		{once: true, name: "cgroup-exact/descendant", fn: "bpf_fentry_test1", counter: filtered, cfg: func(cfg *trawl.Config) { cfg.Cgroup, cfg.CgroupExact = cgroup, true },
			setup: func(t *testing.T) { enterCgroup(t, childCgroup(t, cgroup)) }},
		{once: true, name: "min-duration/reject", fn: "bpf_fentry_test1", counter: filteredExit, cfg: func(cfg *trawl.Config) { cfg.MinDuration = time.Hour }},
		{once: true, name: "min-duration/pass", fn: "bpf_fentry_test1", pass: true, cfg: func(cfg *trawl.Config) { cfg.MinDuration = time.Nanosecond }},
		{name: "errors/reject", fn: "bpf_fentry_test1", counter: filteredExit, cfg: func(cfg *trawl.Config) { cfg.Errors = true }},
		{name: "errors/pass", fn: "vfs_getxattr", pass: true, cfg: func(cfg *trawl.Config) { cfg.Errors = true },
			check: func(c map[string]any) error { return want("errno", c["errno"] != nil, true) }},
		{name: "arg/pass", fn: "bpf_fentry_test1", pass: true, cfg: filter("a == 1"), check: func(c map[string]any) error { return wantArg(c, "a", 1.0) }},
		{name: "arg/reject", fn: "bpf_fentry_test1", counter: filteredExpr, cfg: filter("a == 2 || !(a > 0)")},
		{name: "ret/pass", fn: "bpf_fentry_test1", pass: true, cfg: filter("ret == 2"), check: func(c map[string]any) error { return wantRet(c, 2.0) }},
		{name: "ret/reject", fn: "bpf_fentry_test1", counter: filteredExit, cfg: filter("ret != 2")},
		{name: "string/pass", fn: "do_sys_openat2", pass: true, cfg: filter(`filename == "` + openPath + `"`), check: isOpenPath},
		{name: "string/reject", fn: "do_sys_openat2", counter: filteredExpr, cfg: filter(`filename == "/no/such/file"`)},
		{name: "prefix/pass", fn: "do_sys_openat2", pass: true, cfg: filter(`filename ~ "` + openPath[:12] + `*"`), check: isOpenPath},
		{name: "prefix/reject", fn: "do_sys_openat2", counter: filteredExpr, cfg: filter(`filename ~ "/no/such/*"`)},
		{name: "field/pass", fn: "do_sys_openat2", pass: true, cfg: filter("how->mode == 0640 && (how->flags & 0100) != 0"), check: isOpenPath},
		{name: "field/reject", fn: "do_sys_openat2", counter: filteredExpr, cfg: filter("how->mode == 0641")},
		{name: "enum/pass", fn: dropFn, pass: true, cfg: filter("reason == SKB_DROP_REASON_NO_SOCKET"), check: wantDropReason},
		// No netfilter rule drops anything in the guest; other drops of
		// the test process (a packet to a TIME_WAIT socket, say) may
		// happen, with other reasons.
		{name: "enum/reject", fn: dropFn, counter: filteredExpr, cfg: filter("reason == SKB_DROP_REASON_NETFILTER_DROP")},
	}
	// The other backends share the filter code of the capture program;
	// these two cover trampolines and kprobes (classic ones where the
	// kernel has no kprobe.multi).
	backends := []trawl.Backend{trawl.BackendFentry, trawl.BackendKprobeMulti}
	if _, _, err := trawl.ChooseBackend(trawl.Config{Patterns: []string{"bpf_fentry_test1"}, Backend: trawl.BackendKprobeMulti}); err != nil {
		backends[1] = trawl.BackendKprobe
	}
	backends = slices.DeleteFunc(backends, func(b trawl.Backend) bool {
		_, _, err := trawl.ChooseBackend(trawl.Config{Patterns: []string{"bpf_fentry_test1"}, Backend: b})
		if err != nil {
			t.Logf("%s: not on %s: %v", b, guest.Kernel(), err)
		}
		return err != nil
	})
	traced := map[string]bool{} // the cases a backend traced, not skipped
	for _, backend := range backends {
		t.Run(string(backend), func(t *testing.T) {
			for _, tc := range cases {
				if tc.once && traced[tc.name] {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					if fns := cat.Lookup(tc.fn); len(fns) == 0 || fns[0].Proto() == nil {
						// arm64-5.10's BTF has no do_sys_openat2.
						t.Skipf("kernel %s has no %s with a BTF prototype", guest.Kernel(), tc.fn)
					}
					cfg := trawl.Config{Patterns: []string{tc.fn}, Backend: backend, PIDs: []int{os.Getpid()}}
					tc.cfg(&cfg)
					calls, st := captureFiltered(t, cfg, tc.setup)
					traced[tc.name] = true
					got := calls[tc.fn]
					if !tc.pass {
						if len(got) > 0 {
							t.Fatalf("%d calls of %s reached the ring buffer, want none: %v", len(got), tc.fn, got[0])
						}
						if tc.counter(st) == 0 {
							t.Fatalf("no call counted as filtered in the kernel: %+v", st)
						}
						return
					}
					if len(got) == 0 {
						t.Fatalf("no call of %s passed the filter: %+v", tc.fn, st)
					}
					for _, c := range got {
						if tc.check != nil {
							if err := tc.check(c); err != nil {
								t.Errorf("a call that passed: %v (%v)", err, c)
							}
						}
					}
				})
			}
		})
	}
}

// TestFilterErrors checks what a bad expression, or one that fits no
// function, does.
func TestFilterErrors(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "an expression's errors, found in user space,", guest.SpareAmd64)
	// auto: fentry or fsession where the kernel has them, kprobe on
	// arm64-5.10.
	cfg := trawl.Config{Patterns: []string{"bpf_fentry_test1", "bpf_fentry_test2"}, Backend: trawl.BackendAuto, PIDs: []int{os.Getpid()}}
	cfg.Filter = "a == = 1"
	if _, err := trawl.Open(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "column 6\n  a == = 1\n       ^") {
		t.Errorf("bad expression: %v", err)
	}
	cfg.Filter = "skb->len > 1"
	if _, err := trawl.Open(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "none of the 2 functions") {
		t.Errorf("expression fitting no function: %v", err)
	}
	// bpf_fentry_test2 has an argument b, bpf_fentry_test1 not: left out.
	cfg.Filter = "b == 3"
	var notices []string
	cfg.Notify = func(n string) { notices = append(notices, n) }
	s, err := trawl.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, _ := s.Stats()
	if st.Attached != 1 || !strings.Contains(strings.Join(notices, "\n"), "bpf_fentry_test1") {
		t.Errorf("attached %d, notices %q: want bpf_fentry_test1 left out with a notice", st.Attached, notices)
	}
}

// captureFiltered opens a session, runs setup and the workload, and
// returns the calls read from the ring buffer and the counters.
func captureFiltered(t *testing.T, cfg trawl.Config, setup func(t *testing.T)) (map[string][]map[string]any, trawl.Stats) {
	s, err := trawl.Open(t.Context(), cfg)
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel %s: %v", guest.Kernel(), err)
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if st, _ := s.Stats(); st.Attached == 0 {
		t.Skipf("%s attached nothing on %s: %v", s.Backend, guest.Kernel(), st.Skipped)
	}
	if setup != nil {
		setup(t)
	}
	workload(t)
	calls := readCalls(t, s, time.Second)
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return calls, st
}

// testCgroup makes an empty cgroup v2 directory, mounting the cgroup2
// file system in the guest if needed.
func testCgroup(t *testing.T) string {
	root := "/sys/fs/cgroup"
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		os.MkdirAll(root, 0o755)
		if err := unix.Mount("cgroup2", root, "cgroup2", 0, ""); err != nil {
			t.Fatalf("mount cgroup2: %v", err)
		}
	}
	dir := filepath.Join(root, "trawl-test")
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		os.Remove(dir)
	})
	return dir
}

// childCgroup makes a child of cgroup dir, removed when the test ends.
func childCgroup(t *testing.T, dir string) string {
	child := filepath.Join(dir, "child")
	if err := os.Mkdir(child, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(child) })
	return child
}

// enterCgroup moves the test process into dir until the test ends, when
// it goes back to the root cgroup, where it was.
func enterCgroup(t *testing.T, dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			t.Errorf("leave cgroup: %v", err)
		}
	})
}

// BenchmarkFilterReject measures the cost of a traced call that an
// in-kernel filter rejects, against the same call untraced and traced
// without a filter: getpid(2), which calls __task_pid_nr_ns once.
func BenchmarkFilterReject(b *testing.B) {
	guest.Require(b)
	const fn = "__task_pid_nr_ns"
	for _, backend := range []trawl.Backend{trawl.BackendFentry, trawl.BackendKprobeMulti} {
		for _, bc := range []struct{ name, filter string }{
			{"untraced", ""},
			{"unfiltered", ""},
			{"reject-arg", "type == 99"},
			{"reject-field", "task->pid == 0"},
			{"reject-ret", "ret == -1"},
		} {
			b.Run(string(backend)+"/"+bc.name, func(b *testing.B) {
				if bc.name != "untraced" {
					cfg := trawl.Config{Patterns: []string{fn}, Backend: backend, PIDs: []int{os.Getpid()}, Filter: bc.filter}
					s, err := trawl.Open(b.Context(), cfg)
					if errors.Is(err, ebpf.ErrNotSupported) {
						b.Skipf("kernel %s: %v", guest.Kernel(), err)
					}
					if err != nil {
						b.Fatal(err)
					}
					var wg sync.WaitGroup
					wg.Add(1)
					go func() { // drain the ring buffer
						defer wg.Done()
						var c trawl.Call
						for s.Read(b.Context(), &c) == nil {
						}
					}()
					defer func() {
						st, _ := s.Stats()
						s.Close()
						wg.Wait()
						b.ReportMetric(float64(st.Calls)/float64(b.N), "traced/op")
						b.ReportMetric(float64(st.FilteredExpr)/float64(b.N), "filtered/op")
					}()
				}
				b.ResetTimer()
				for range b.N {
					unix.Getpid()
				}
			})
		}
	}
}
