// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// kernelWith makes up a kernel that has the named backends' features.
func kernelWith(names ...Name) Probe {
	return func(b *Backend) error {
		if slices.Contains(names, b.Name) {
			return nil
		}
		return errors.New("not on this kernel")
	}
}

// TestChooseAuto checks what auto picks and why, and that the cases take
// every rule of autoRules.
func TestChooseAuto(t *testing.T) {
	all := []Name{NameFentry, NameKprobeMulti, NameKprobeSession, NameFsession, NameTracingMulti}
	taken := make([]bool, len(autoRules))
	for _, c := range []struct {
		name   string
		kernel []Name
		n      int
		gated  bool // --entry
		want   Name
		why    string
	}{
		{"7.3 x86", all, 2000, false, NameTracingMulti, "one program and one tracing_multi link for all 2000 functions (at most 2000), trampoline cost per call"},
		{"7.3 x86, 2001", all, 2001, false, NameKprobeSession, "2001 functions (more than 20): one kprobe.session program and link for all"},
		{"tracing_multi, no kprobe.multi", []Name{NameFentry, NameTracingMulti}, 2001, false, NameTracingMulti, "2001 functions: no kprobe.multi on this kernel, so one tracing_multi link for all"},
		{"7.3 x86, few", all, 6, false, NameFsession, "6 functions (at most 8): one fsession trampoline program each, faster to attach than a tracing_multi link"},
		{"7.3 x86, 8", all, 8, false, NameFsession, "8 functions (at most 8): one fsession trampoline program each, faster to attach than a tracing_multi link"},
		{"7.3 x86, 9", all, 9, false, NameTracingMulti, "one program and one tracing_multi link for all 9 functions (at most 2000), trampoline cost per call"},
		{"7.0", all[:4], 20, false, NameFsession, "20 functions (at most 20): one fsession trampoline program each"},
		{"7.0, more than 20", all[:4], 21, false, NameKprobeSession, "21 functions (more than 20): one kprobe.session program and link for all"},
		{"6.12", all[:3], 5, false, NameFentry, "5 functions (at most 20): one fentry and one fexit program each"},
		{"6.6", all[:2], 100, false, NameKprobeMulti, "100 functions (more than 20): one kprobe.multi and one kretprobe.multi link for all"},
		{"6.6, few", all[:2], 5, false, NameFentry, "5 functions (at most 20): one fentry and one fexit program each"},
		{"arm64 6.12", all[:1], 100, false, NameFentry, "100 functions: no kprobe.multi on this kernel, so one fentry and one fexit program each"},
		{"arm64 7.3, 9", all[:4], 9, false, NameFsession, "9 functions (at most 20): one fsession trampoline program each"},
		{"no kprobe.multi, fsession", []Name{NameFentry, NameFsession}, 100, false, NameFsession, "100 functions: no kprobe.multi on this kernel, so one fsession program each"},
		{"no kprobe.multi, fsession, 101", []Name{NameFentry, NameFsession}, 101, false, NameFsession, "101 functions: no kprobe.multi on this kernel, so one fsession program each"},
		{"amd64 5.10", []Name{NameFentry, NameKprobe}, 5, false, NameFentry, "5 functions (at most 20): one fentry and one fexit program each"},
		{"amd64 5.10, many", []Name{NameFentry, NameKprobe}, 100, false, NameFentry, "100 functions: no kprobe.multi on this kernel, so one fentry and one fexit program each"},
		{"arm64 5.10", []Name{NameKprobe}, 5, false, NameKprobe, "5 functions: neither kprobe.multi nor fentry on this kernel, so one kprobe and one kretprobe each"},
		{"arm64 5.10, many", []Name{NameKprobe}, 100, false, NameKprobe, "100 functions: neither kprobe.multi nor fentry on this kernel, so one kprobe and one kretprobe each"},
		{"7.3 x86, few, --entry", all, 5, true, NameFentry, "5 functions (at most 8) with --entry: one fentry and one fexit program each, faster to attach than a tracing_multi link"},
		{"7.3 x86, 9, --entry", all, 9, true, NameTracingMulti, "one program and one tracing_multi link for all 9 functions (at most 2000), trampoline cost per call"},
		{"7.3 x86, every function, --entry", all, 45000, true, NameKprobeSession, "45000 functions (more than 20): one kprobe.session program and link for all"},
		{"7.0, 20, --entry", all[:4], 20, true, NameFentry, "20 functions (at most 20): one fentry and one fexit program each"},
		{"7.0, more than 20, --entry", all[:4], 21, true, NameKprobeSession, "21 functions (more than 20): one kprobe.session program and link for all"},
		{"no kprobe.multi, fsession, --entry", []Name{NameFentry, NameFsession}, 100, true, NameFentry, "100 functions: no kprobe.multi on this kernel, so one fentry and one fexit program each"},
	} {
		b, why, err := Choose(Auto, c.n, 0, c.gated, kernelWith(c.kernel...))
		if err != nil || b.Name != c.want || why != c.why {
			t.Errorf("%s: %v (%q), %v; want %s (%q)", c.name, b, why, err, c.want, c.why)
			continue
		}
		for i, r := range autoRules {
			if r.backend == b && r.holds(c.n, c.gated) {
				taken[i] = true
				break
			}
		}
	}
	for i, r := range autoRules {
		if !taken[i] {
			t.Errorf("no case takes rule %d (%s: %q)", i, r.backend.Name, r.why)
		}
	}
}

func TestChooseByName(t *testing.T) {
	if b, _, err := Choose(NameKprobeMulti, 1, 0, false, kernelWith(NameKprobeMulti)); err != nil || b != KprobeMulti {
		t.Errorf("kprobe-multi on a kernel with it: %v, %v", b, err)
	}
	_, _, err := Choose(NameFsession, 1, 0, false, kernelWith(NameFentry))
	if u := (*Unavailable)(nil); !errors.As(err, &u) || !u.Named || len(u.Refusals) != 1 || u.Refusals[0].Backend != NameFsession ||
		err.Error() != "fsession backend: not on this kernel" {
		t.Errorf("fsession on a kernel without it: %v, want an *Unavailable naming it", err)
	}
	// fsession with --entry attaches fentry's programs, and says so.
	b, why, err := Choose(NameFsession, 5, 0, true, kernelWith(NameFentry, NameFsession))
	if err != nil || b != Fentry || why != "chosen by the caller: fsession with --entry runs fentry's programs, whose exit returns at once for a call outside every entry call" {
		t.Errorf("fsession with --entry: %v (%q), %v; want fentry, and why", b, why, err)
	}
	if b, _, err := Choose(NameFsession, 5, 0, false, kernelWith(NameFentry, NameFsession)); err != nil || b != Fsession {
		t.Errorf("fsession without --entry: %v, %v", b, err)
	}
	if _, _, err := Choose(Auto, 1, 0, false, kernelWith()); err == nil || !strings.Contains(err.Error(), "kprobe: not on this kernel") {
		t.Errorf("auto on a kernel without any backend: %v, want what each lacks", err)
	}
	// arm64-5.10 at Debian's perf_event_paranoid 3: what the user can
	// change leads.
	paranoid := func(b *Backend) error {
		if b.Name == NameKprobe {
			return errors.New("perf events need CAP_SYS_ADMIN here")
		}
		return fmt.Errorf("%s: %w", b.Name, ebpf.ErrNotSupported)
	}
	if _, _, err := Choose(Auto, 1, 0, false, paranoid); err == nil || !strings.HasPrefix(err.Error(), "no backend can attach on this kernel: kprobe: perf events need CAP_SYS_ADMIN") {
		t.Errorf("auto where only a permission is missing: %v, want that first", err)
	}
	if _, _, err := Choose("uprobe", 1, 0, false, kernelWith(NameFentry)); err == nil {
		t.Error("an unknown backend: no error")
	}
}

// TestChooseRaw checks that auto picks a kprobe link when functions
// without a BTF prototype, which trampolines cannot attach, are selected,
// and what it picks as ever when the kernel has none.
func TestChooseRaw(t *testing.T) {
	all := []Name{NameFentry, NameKprobeMulti, NameKprobeSession, NameFsession, NameTracingMulti}
	for _, c := range []struct {
		name   string
		kernel []Name
		want   Name
		why    string
	}{
		{"6.12", all[:3], NameKprobeSession, "5 functions, 1 without a BTF prototype, which trampolines cannot attach: one kprobe-session link for all"},
		{"6.6", all[:2], NameKprobeMulti, "5 functions, 1 without a BTF prototype, which trampolines cannot attach: one kprobe-multi link for all"},
		{"arm64 6.12", all[:1], NameFentry, "5 functions (at most 8) with --entry: one fentry and one fexit program each, faster to attach than a tracing_multi link"},
	} {
		b, why, err := Choose(Auto, 5, 1, true, kernelWith(c.kernel...))
		if err != nil || b.Name != c.want || why != c.why {
			t.Errorf("%s: %v (%q), %v; want %s (%q)", c.name, b, why, err, c.want, c.why)
		}
	}
}

// TestRegistry checks every backend is complete and Names lists each once.
func TestRegistry(t *testing.T) {
	names := Names()
	if names[0] != Auto || len(names) != len(All())+1 {
		t.Errorf("Names() = %v", names)
	}
	for _, b := range All() {
		if b.Name == "" || b.Needs == nil || b.Attach == nil {
			t.Errorf("backend %q lacks a name, a probe or Attach", b.Name)
		}
		if Find(b.Name) != b {
			t.Errorf("Find(%q) finds another backend", b.Name)
		}
	}
}

func TestAutoChoices(t *testing.T) {
	for _, c := range []struct {
		kernel []Name
		want   string
	}{
		{[]Name{NameFentry, NameKprobeMulti, NameKprobeSession, NameFsession, NameTracingMulti}, "1-8 fsession, 9-2000 tracing-multi, 2001+ kprobe-session"},
		{[]Name{NameFentry, NameKprobeMulti, NameKprobeSession}, "1-20 fentry, 21+ kprobe-session"},
		{[]Name{NameFentry, NameKprobe}, "1+ fentry"},
		{[]Name{NameKprobe}, "1+ kprobe"},
		{nil, ""},
	} {
		var got []string
		for _, a := range AutoChoices(kernelWith(c.kernel...)) {
			r := fmt.Sprintf("%d-%d", a.Min, a.Max)
			if a.Max == 0 {
				r = fmt.Sprintf("%d+", a.Min)
			}
			got = append(got, r+" "+string(a.Backend.Name))
		}
		if strings.Join(got, ", ") != c.want {
			t.Errorf("%v: %q, want %q", c.kernel, strings.Join(got, ", "), c.want)
		}
	}
}

// TestChooseExternalBTF checks that with the kernel's BTF from a file
// auto picks a kprobe backend where it would pick a trampoline, and that
// a trampoline backend named is refused, saying why.
func TestChooseExternalBTF(t *testing.T) {
	all := kernelWith(NameFentry, NameKprobe, NameKprobeMulti, NameKprobeSession, NameFsession, NameTracingMulti)
	for _, n := range []int{1, 10, 5000} {
		b, _, err := Choose(Auto, n, 0, false, withExternalBTF(all, true))
		if err != nil || b.Family != plan.Kprobe {
			t.Errorf("%d functions: %v, %v; want a kprobe backend", n, b, err)
		}
		if b, _, _ := Choose(Auto, n, 0, false, withExternalBTF(all, false)); n < 5000 && b.Family != plan.Trampoline {
			t.Errorf("%d functions with the kernel's own BTF: %s, want a trampoline", n, b.Name)
		}
	}
	old := kernelWith(NameFentry, NameKprobe)
	if b, _, err := Choose(Auto, 3, 0, true, withExternalBTF(old, true)); err != nil || b != Kprobe {
		t.Errorf("a kernel without kprobe links: %v, %v; want kprobe", b, err)
	}
	for _, name := range []Name{NameFentry, NameFsession, NameTracingMulti} {
		_, _, err := Choose(name, 3, 0, false, withExternalBTF(all, true))
		if !errors.Is(err, kernel.ErrExternalBTF) || !strings.Contains(err.Error(), string(name)+" backend: the kernel has no BTF of its own, which trampolines attach by") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
