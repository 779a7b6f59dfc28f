// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// report is one call of Progress.
type report struct{ attached, skipped, total int }

// recorder returns a Progress that appends its calls to reports.
func recorder(reports *[]report) Progress {
	return func(attached, skipped, total int) {
		*reports = append(*reports, report{attached, skipped, total})
	}
}

func target(id int, name string, addrs ...uint64) Target {
	return Target{ID: uint32(id), Plan: &plan.Plan{Func: &kernel.Function{Name: name, Addrs: addrs}}}
}

// TestProgressByAddress attaches five functions by address, as the
// kprobe backends do: one has no address, one has an address the kernel
// refuses among its two. Progress must count functions, and only those
// whose every address is attached.
func TestProgressByAddress(t *testing.T) {
	const bad = 0x3002
	targets := []Target{
		target(0, "a", 0x1000),
		target(1, "b", 0x2000, 0x2001),
		target(2, "c", 0x3000, bad),
		target(3, "d"),
		target(4, "e", 0x5000),
	}
	var reports []report
	a := newAttachment(len(targets), recorder(&reports))
	_, err := attachByAddress(context.Background(), a, "test", targets, func(opts link.KprobeMultiOptions) ([]link.Link, error) {
		if slices.Contains(opts.Addresses, bad) {
			return nil, fmt.Errorf("create link: %w", syscall.EINVAL)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkReports(t, reports, report{attached: 3, skipped: 2, total: 5})
	if a.Attached != 3 {
		t.Errorf("Attached = %d, want 3", a.Attached)
	}
	if got := a.Skipped["no address in kallsyms"]; !slices.Equal(got, []string{"d"}) {
		t.Errorf("skipped for no address: %v", got)
	}
	if got := a.Skipped["rejected by the kernel (EINVAL)"]; !slices.Equal(got, []string{"0x3002"}) {
		t.Errorf("skipped for EINVAL: %v", got)
	}
}

// TestProgressEach attaches functions one by one in parallel, as the
// trampoline backends do, skipping every third.
func TestProgressEach(t *testing.T) {
	var targets []Target
	for i := range 100 {
		targets = append(targets, target(i, fmt.Sprint("f", i)))
	}
	var reports []report
	a, err := attachEach(context.Background(), targets, perFunction{files: 1, memory: 1}, recorder(&reports), func(a *Attachment, t Target) error {
		if t.ID%3 == 0 {
			a.skipFunc("test", t.Plan.Func.Name)
			return nil
		}
		a.addFunc(nil, nil)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkReports(t, reports, report{attached: 66, skipped: 34, total: 100})
	if len(reports) != 100 {
		t.Errorf("%d reports, want one per function", len(reports))
	}
	if a.Attached != 66 {
		t.Errorf("Attached = %d, want 66", a.Attached)
	}
}

// checkReports checks the reports grow one step at a time and end at last.
func checkReports(t *testing.T, reports []report, last report) {
	t.Helper()
	if len(reports) == 0 {
		t.Fatal("no progress reported")
	}
	prev := report{total: last.total}
	for _, r := range reports {
		if r.total != last.total || r.attached < prev.attached || r.skipped < prev.skipped || r.attached > last.attached || r.skipped > last.skipped {
			t.Errorf("report %+v after %+v, last to be %+v", r, prev, last)
		}
		prev = r
	}
	if prev != last {
		t.Errorf("last report %+v, want %+v", prev, last)
	}
}
