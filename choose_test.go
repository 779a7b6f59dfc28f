// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
)

// kernelWith makes up a kernel that has the named backends' features.
func kernelWith(names ...string) probeFunc {
	return func(b *backend.Backend) error {
		if slices.Contains(names, b.Name) {
			return nil
		}
		return errors.New("not on this kernel")
	}
}

// selection makes up a selection of n vmlinux functions and m module ones.
func selection(n, m int) *selector.Selection {
	sel := &selector.Selection{}
	for i := range n {
		sel.Selected = append(sel.Selected, &kernel.Function{Name: fmt.Sprint("f", i)})
	}
	for i := range m {
		sel.Selected = append(sel.Selected, &kernel.Function{Name: fmt.Sprint("m", i), Module: "mod"})
	}
	return sel
}

func TestChooseAuto(t *testing.T) {
	all := []string{"fentry", "kprobe-multi", "kprobe-session", "fsession", "tracing-multi"}
	for _, c := range []struct {
		name          string
		kernel        []string
		vmlinux, mods int
		want          string
		gated         bool // --entry
	}{
		{"7.3 x86", all, 5000, 0, "tracing-multi", false},
		{"7.3 x86, modules", all, 5000, 1, "tracing-multi", false},
		{"7.3 x86, few, modules", all, 5, 1, "fsession", false},
		{"7.3 x86, 8", all, 8, 0, "fsession", false},
		{"7.3 x86, 9", all, 9, 0, "tracing-multi", false},
		{"7.0", all[:4], 20, 0, "fsession", false},
		{"7.0, more than 20", all[:4], 21, 0, "kprobe-session", false},
		{"6.12", all[:3], 5, 0, "fentry", false},
		{"6.6", all[:2], 100, 0, "kprobe-multi", false},
		{"arm64 6.12", all[:1], 100, 0, "fentry", false},
		{"no kprobe.multi, fsession", []string{"fentry", "fsession"}, 100, 0, "fsession", false},
		{"no kprobe.multi, fsession, modules", []string{"fentry", "fsession"}, 100, 1, "fsession", false},
		{"amd64 5.10", []string{"fentry", "kprobe"}, 5, 0, "fentry", false},
		{"amd64 5.10, many", []string{"fentry", "kprobe"}, 100, 0, "fentry", false},
		{"arm64 5.10", []string{"kprobe"}, 5, 0, "kprobe", false},
		{"arm64 5.10, many", []string{"kprobe"}, 100, 0, "kprobe", false},
		{"7.3 x86, few, --entry", all, 5, 0, "fentry", true},
		{"7.3 x86, many, --entry", all, 5000, 0, "tracing-multi", true},
		{"7.0, 20, --entry", all[:4], 20, 0, "fentry", true},
		{"no kprobe.multi, fsession, --entry", []string{"fentry", "fsession"}, 100, 0, "fentry", true},
	} {
		b, why, err := pickBackend(BackendAuto, selection(c.vmlinux, c.mods), c.gated, kernelWith(c.kernel...))
		if err != nil || b.Name != c.want || why == "" {
			t.Errorf("%s: %v (%q), %v; want %s", c.name, b.Name, why, err, c.want)
		}
	}
}

func TestChooseByName(t *testing.T) {
	sel := selection(1, 0)
	if b, _, err := pickBackend("kprobe-multi", sel, false, kernelWith("kprobe-multi")); err != nil || b != backend.KprobeMulti {
		t.Errorf("kprobe-multi on a kernel with it: %v, %v", b, err)
	}
	if _, _, err := pickBackend("fsession", sel, false, kernelWith("fentry")); err == nil {
		t.Error("fsession on a kernel without it: no error")
	}
	if _, _, err := pickBackend(BackendAuto, sel, false, kernelWith()); err == nil || !strings.Contains(err.Error(), "kprobe: not on this kernel") {
		t.Errorf("auto on a kernel without any backend: %v, want what each lacks", err)
	}
	// arm64-5.10 at Debian's perf_event_paranoid 3: what the user can
	// change leads.
	paranoid := func(b *backend.Backend) error {
		if b.Name == "kprobe" {
			return errors.New("perf events need CAP_SYS_ADMIN here")
		}
		return fmt.Errorf("%s: %w", b.Name, ebpf.ErrNotSupported)
	}
	if _, _, err := pickBackend(BackendAuto, sel, false, paranoid); err == nil || !strings.HasPrefix(err.Error(), "no backend can attach on this kernel: kprobe: perf events need CAP_SYS_ADMIN") {
		t.Errorf("auto where only a permission is missing: %v, want that first", err)
	}
	if _, _, err := pickBackend("uprobe", sel, false, kernelWith("fentry")); err == nil {
		t.Error("an unknown backend: no error")
	}
}

// TestRegistry checks every backend is complete and Names lists each once.
func TestRegistry(t *testing.T) {
	names := backendNames()
	if names[0] != BackendAuto || len(names) != len(backend.All())+1 {
		t.Errorf("backendNames() = %v", names)
	}
	for _, b := range backend.All() {
		if b.Name == "" || b.Needs == nil || b.Attach == nil {
			t.Errorf("backend %q lacks a name, a probe or Attach", b.Name)
		}
		if backend.Find(b.Name) != b {
			t.Errorf("Find(%q) finds another backend", b.Name)
		}
	}
}

func TestAutoChoices(t *testing.T) {
	for _, c := range []struct {
		kernel []string
		want   string
	}{
		{[]string{"fentry", "kprobe-multi", "kprobe-session", "fsession", "tracing-multi"}, "1-8 fsession, 9+ tracing-multi"},
		{[]string{"fentry", "kprobe-multi", "kprobe-session"}, "1-20 fentry, 21+ kprobe-session"},
		{[]string{"fentry", "kprobe"}, "1+ fentry"},
		{[]string{"kprobe"}, "1+ kprobe"},
		{nil, ""},
	} {
		var got []string
		for _, a := range autoChoices(kernelWith(c.kernel...)) {
			r := fmt.Sprintf("%d-%d", a.Min, a.Max)
			if a.Max == 0 {
				r = fmt.Sprintf("%d+", a.Min)
			}
			got = append(got, r+" "+a.Backend.Name)
		}
		if strings.Join(got, ", ") != c.want {
			t.Errorf("%v: %q, want %q", c.kernel, strings.Join(got, ", "), c.want)
		}
	}
}
