// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// attachAllEnv enables TestAttachAll. Attaching every traceable function
// takes about 15 minutes under TCG, and the emulated amd64-7.3 guest has
// panicked in two of three runs while the kernel patched tens of thousands
// of call sites (int3 left in pull_rt_task; a fault inside a trampoline),
// likely emulated cross-CPU code patching, so `make vmtest` leaves it out.
// With one vCPU it passed (16 minutes); run it by hand:
//
//	TRAWL_ATTACH_ALL=1 go test -timeout 40m -run TestAttachAll \
//		-exec "$PWD/bin/vmrun -kernel amd64-7.3 -smp 1 -timeout 40m" .
const attachAllEnv = "TRAWL_ATTACH_ALL"

// TestFentryTooMany checks that fentry on every function is refused before
// anything is loaded, rather than running the guest (1 GB) out of memory,
// as it did at about 7000 functions; and so is the kprobe backend, which
// also loads programs per function.
func TestFentryTooMany(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "the memory check of per-function programs", guest.SpareAmd64, "arm64-5.10")
	for _, b := range []trawl.Backend{trawl.BackendFentry, trawl.BackendKprobe} {
		t.Run(string(b), func(t *testing.T) {
			s, err := trawl.Open(t.Context(), trawl.Config{Patterns: []string{"*"}, Backend: b})
			if errors.Is(err, ebpf.ErrNotSupported) {
				t.Skipf("kernel %s: %v", guest.Kernel(), err)
			}
			if err == nil {
				s.Close()
				t.Fatalf("%s on every function was not refused", b)
			}
			if !errors.Is(err, trawl.ErrNotEnoughMemory) {
				t.Fatalf("%s on every function: %v, want ErrNotEnoughMemory", b, err)
			}
			t.Log(err)
		})
	}
}

// TestAttachAll attaches the capture program to every traceable function
// with the backends that take them all in one link, traces a little, and
// checks that closing the session leaves no function patched. It logs the
// attach and detach times.
func TestAttachAll(t *testing.T) {
	guest.Require(t)
	if os.Getenv(attachAllEnv) == "" {
		t.Skipf("set %s=1 to attach every traceable function (minutes under TCG)", attachAllEnv)
	}
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	all, err := selector.Select(cat, []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []trawl.Backend{trawl.BackendKprobeMulti, trawl.BackendTracingMulti} {
		t.Run(string(b)+"/all", func(t *testing.T) {
			attached := attachAndDetach(t, b)
			// A few hundred functions refuse each mechanism (no BTF
			// prototype, notrace aliases); most must attach.
			if attached < len(all.Selected)/2 {
				t.Errorf("%s attached %d of %d selected functions", b, attached, len(all.Selected))
			}
		})
	}
}

// attachAndDetach opens a session with backend b on every function, runs a
// little workload, closes it, checks that no function stays patched and
// returns the number of functions attached.
func attachAndDetach(t *testing.T, b trawl.Backend) int {
	before := patched(t)
	// Trace a child, not this process: tracing every function of the
	// process that attaches them slows attaching several times.
	child := exec.Command(os.Args[0], "-test.run=^TestAttachAllChild$")
	child.Env = append(os.Environ(), attachAllChildEnv+"=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	start := time.Now()
	s, err := trawl.Open(t.Context(), trawl.Config{Patterns: []string{"*"}, Backend: b, PIDs: []int{child.Process.Pid}})
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel %s: %v", guest.Kernel(), err)
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	attach := time.Since(start)
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Error(err)
	}
	during := patched(t)
	start = time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	t.Logf("%s: %d functions attached in %v, detached in %v; %d calls seen; %d functions patched while attached; skipped: %s",
		b, st.Attached, attach.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), st.Calls, during-before, strings.Join(st.Skipped.Summary(0), "; "))
	if st.Calls == 0 {
		t.Error("no call of the child seen")
	}
	refusedByVerifier(t, st)
	if during-before < st.Attached {
		t.Errorf("%d functions attached but only %d patched", st.Attached, during-before)
	}
	if after := patched(t); after != before {
		t.Errorf("%d functions patched before the session and %d after it closed", before, after)
	}
	return st.Attached
}

// attachAllChildEnv makes TestAttachAllChild the traced child of
// TestAttachAll.
const attachAllChildEnv = "TRAWL_ATTACH_ALL_CHILD"

// TestAttachAllChild waits for its standard input to close, then makes a
// few system calls for TestAttachAll to see.
func TestAttachAllChild(t *testing.T) {
	if os.Getenv(attachAllChildEnv) == "" {
		t.Skip("run by TestAttachAll")
	}
	io.Copy(io.Discard, os.Stdin)
	os.Stat("/")
}

// patched counts the functions ftrace has patched.
func patched(t *testing.T) int {
	t.Helper()
	n, err := guest.EnabledFunctions()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
