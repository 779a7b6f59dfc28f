// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// fixture returns the amd64 fixture as a MapFS, without the files named in
// drop, and with edit applied to the others.
func fixture(t testing.TB, edit func(name string, data []byte) []byte, drop ...string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	root := os.DirFS("testdata/amd64")
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		for _, name := range drop {
			if strings.HasSuffix(p, "/"+name) {
				return nil
			}
		}
		data, err := fs.ReadFile(root, p)
		if edit != nil {
			data = edit(p, data)
		}
		m[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func load(t testing.TB, fsys fs.FS) *Catalogue {
	t.Helper()
	c, err := Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func only(t *testing.T, c *Catalogue, name string) *Function {
	t.Helper()
	fns := c.Lookup(name)
	if len(fns) != 1 {
		t.Fatalf("%s: %d entries, want 1", name, len(fns))
	}
	return fns[0]
}

// TestMessyCases checks each case real kernels have, for both tracefs
// sources: with addresses (6.5+) and names joined with kallsyms.
func TestMessyCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fsys   fs.FS
		source Source
	}{
		{"addrs", fixture(t, nil), FromFilterAddrs},
		{"names", fixture(t, nil, filterAddrs), FromFilterNames},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, tc.fsys)
			if c.Source() != tc.source || c.Notice() != "" {
				t.Fatalf("source %s, notice %q; want %s and none", c.Source(), c.Notice(), tc.source)
			}

			f := only(t, c, "tcp_sendmsg")
			if !f.Traceable || f.Proto() == nil || f.BTFID == 0 || len(f.Addrs) != 1 || f.Addrs[0] != 0xffffffff82010db0 {
				t.Errorf("tcp_sendmsg: %+v", f)
			}
			if got, want := Prototype(f.Proto()), "int tcp_sendmsg(struct sock *sk, struct msghdr *msg, size_t size)"; got != want {
				t.Errorf("prototype %q, want %q", got, want)
			}

			// A clone at three addresses: traceable, all addresses, no prototype.
			f = only(t, c, "NF_HOOK.constprop.0")
			if !f.Traceable || f.Proto() != nil || len(f.Addrs) != 3 || f.Copies != 3 || !strings.Contains(f.ProtoNote, "compiler clone of NF_HOOK") {
				t.Errorf("NF_HOOK.constprop.0: %+v", f)
			}

			// BTF function whose only symbol is its clone.
			f = only(t, c, "HUF_decompress4X1_usingDTable_internal_fast")
			if f.Traceable || f.Proto() == nil || !strings.Contains(f.Reason, "only compiler clones: HUF_decompress4X1_usingDTable_internal_fast.constprop.0") {
				t.Errorf("clone-only function: %+v", f)
			}

			// ThinLTO rename keeps the prototype, and says so.
			f = only(t, c, "tcp_v4_send_reset.llvm.4077523316537185513")
			if !f.Traceable || f.Proto() == nil || f.Proto().Name != "tcp_v4_send_reset" || !strings.Contains(f.ProtoNote, "LTO") {
				t.Errorf("llvm rename: %+v", f)
			}
			if fns := c.Lookup("tcp_v4_send_reset"); len(fns) != 0 {
				t.Errorf("the BTF name of a renamed function has its own entry: %+v", fns[0])
			}

			// Two static functions of one name.
			f = only(t, c, "ip_finish_output2")
			if !f.Traceable || len(f.Addrs) != 2 || f.Copies != 2 {
				t.Errorf("duplicate name: %+v", f)
			}

			// In kallsyms but not traceable; in BTF but not in kallsyms.
			f = only(t, c, "native_sched_clock")
			if f.Traceable || !strings.Contains(f.Reason, "notrace") {
				t.Errorf("notrace: %+v", f)
			}
			f = only(t, c, "acpi_processor_driver_exit")
			if f.Traceable || f.Proto() == nil || !strings.Contains(f.Reason, "not in /proc/kallsyms") {
				t.Errorf("BTF only: %+v", f)
			}
			if fns := c.Lookup("calibrate_delay.cold"); len(fns) != 0 {
				t.Errorf("cold part is in the catalogue: %+v", fns[0])
			}

			// Module function without module BTF.
			f = only(t, c, "nf_conntrack_in")
			if !f.Traceable || f.Module != "nf_conntrack" || f.Proto() != nil || !strings.Contains(f.ProtoNote, "nf_conntrack has no BTF") {
				t.Errorf("module function: %+v", f)
			}
		})
	}
}

func TestTraceableSetIsTheKernelsFile(t *testing.T) {
	c := load(t, fixture(t, nil))
	data, err := os.ReadFile("testdata/amd64/sys/kernel/tracing/available_filter_functions_addrs")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(c.Traceable()) != len(lines) {
		t.Fatalf("%d traceable symbols, the file has %d lines", len(c.Traceable()), len(lines))
	}
	for i, s := range c.Traceable() {
		if !strings.Contains(lines[i], s.Name) {
			t.Errorf("entry %d is %s, file says %q", i, s.Name, lines[i])
		}
	}
}

func TestFallbackWithoutTracefs(t *testing.T) {
	c := load(t, fixture(t, nil, filterAddrs, filterNames))
	if c.Source() != FromKallsymsBTF || !strings.Contains(c.Notice(), "tracefs is not readable (not mounted: mount -t tracefs tracefs /sys/kernel/tracing)") {
		t.Fatalf("source %s, notice %q", c.Source(), c.Notice())
	}
	// Mounted, but without the lists (a kernel without dynamic ftrace).
	mounted := fixture(t, nil, filterAddrs, filterNames)
	mounted["sys/kernel/tracing/trace"] = &fstest.MapFile{}
	if n := load(t, mounted).Notice(); !strings.Contains(n, "tracefs is not readable (no available_filter_functions under") {
		t.Errorf("tracefs mounted without the lists: notice %q", n)
	}
	// Without tracefs only BTF functions are assumed traceable.
	if f := only(t, c, "native_sched_clock"); !f.Traceable {
		t.Errorf("BTF function in kallsyms is not traceable in the fallback: %+v", f)
	}
	if fns := c.Lookup("NF_HOOK.constprop.0"); len(fns) != 0 {
		t.Errorf("function without BTF is in the fallback catalogue: %+v", fns[0])
	}
}

func TestHiddenAddresses(t *testing.T) {
	zero := regexp.MustCompile(`(?m)^[0-9a-f]+ `)
	c := load(t, fixture(t, func(name string, data []byte) []byte {
		if strings.HasSuffix(name, "kallsyms") {
			return zero.ReplaceAll(data, []byte("0000000000000000 "))
		}
		return data
	}, filterAddrs))
	if !strings.Contains(c.Notice(), "hides addresses") {
		t.Errorf("notice %q does not mention hidden addresses", c.Notice())
	}
	f := only(t, c, "ip_finish_output2")
	if !f.Traceable || f.Addrs != nil || f.Copies != 2 || f.AddrNote == "" {
		t.Errorf("hidden duplicate: %+v", f)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys fs.FS
		want string
	}{
		{"no BTF", fixture(t, nil, "vmlinux"), "kernel BTF not found"},
		{"no kallsyms", fixture(t, nil, "kallsyms"), "read kernel symbols"},
		{"bad kallsyms", fixture(t, func(name string, data []byte) []byte {
			if strings.HasSuffix(name, "kallsyms") {
				return append(data, "zzzz T broken\n"...)
			}
			return data
		}), `bad address "zzzz"`},
		{"bad BTF", fixture(t, func(name string, data []byte) []byte {
			if strings.HasSuffix(name, "vmlinux") {
				return data[:10]
			}
			return data
		}), "parse BTF of vmlinux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.fsys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Load(fixture(t, nil, "vmlinux")); !errors.Is(err, ErrNoBTF) {
		t.Errorf("missing BTF: %v is not ErrNoBTF", err)
	}
}

// TestLive checks the catalogue of this machine's kernel.
func TestLive(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("no kernel BTF on this machine")
	}
	c, release, err := Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if n := len(c.Functions()); n < 10000 {
		t.Fatalf("only %d functions", n)
	}
	f := only(t, c, "tcp_sendmsg")
	if !f.Traceable || Prototype(f.Proto()) != "int tcp_sendmsg(struct sock *sk, struct msghdr *msg, size_t size)" {
		t.Errorf("tcp_sendmsg: %+v", f)
	}
	printk := "_printk"
	if len(c.Lookup(printk)) == 0 {
		printk = "printk" // before 5.15
	}
	if f := only(t, c, printk); !strings.HasSuffix(Prototype(f.Proto()), "(const char *fmt, ...)") {
		t.Errorf("%s prototype %q", printk, Prototype(f.Proto()))
	}
	if len(c.Traceable()) == 0 {
		t.Error("empty traceable set")
	}
	// One entry per name and module: a traceable function whose BTF
	// prototypes disagree (6.1's __x64_sys_sched_rr_get_interval_time32)
	// was listed a second time as not traceable, at the same address.
	seen := make(map[[2]string]bool)
	for _, f := range c.Functions() {
		k := [2]string{f.Module, f.Name}
		if seen[k] {
			t.Errorf("%s [%s] listed twice: %+v", f.Name, f.Module, c.Lookup(f.Name))
		}
		seen[k] = true
	}
}

func BenchmarkLoadLive(b *testing.B) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		b.Skip("no kernel BTF on this machine")
	}
	var c *Catalogue
	for b.Loop() {
		c = load(b, os.DirFS("/"))
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "MiB-held")
	runtime.KeepAlive(c)
}

// BenchmarkLoadNamesLive loads the catalogue a trace of one function
// named in full loads at its start (docs/benchmarks.md, "Cold start").
func BenchmarkLoadNamesLive(b *testing.B) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		b.Skip("no kernel BTF on this machine")
	}
	for b.Loop() {
		if _, err := LoadNames(os.DirFS("/"), []string{"vfs_read"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLoadNames checks that the catalogue of some names describes each of
// them exactly as the whole catalogue does, and symbolises alike.
func TestLoadNames(t *testing.T) {
	cases := []struct {
		name string
		fsys fs.FS
		step int // every step-th function of the whole catalogue is named
	}{
		{"addrs", fixture(t, nil), 1},
		{"names", fixture(t, nil, filterAddrs), 1},
		{"no tracefs", fixture(t, nil, filterAddrs, filterNames), 1},
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err == nil {
		cases = append(cases, struct {
			name string
			fsys fs.FS
			step int
		}{"live", os.DirFS("/"), 97})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			full := load(t, tc.fsys)
			var names []string
			for i, f := range full.Functions() {
				if i%tc.step == 0 {
					names = append(names, f.Name)
				}
			}
			part, err := LoadNames(tc.fsys, names)
			if err != nil {
				t.Fatal(err)
			}
			if len(part.Functions()) >= len(full.Functions()) && tc.step > 1 {
				t.Errorf("%d functions for %d names, as many as the whole catalogue", len(part.Functions()), len(names))
			}
			for _, name := range names {
				want, got := full.Lookup(name), part.Lookup(name)
				if len(got) != len(want) {
					t.Errorf("%s: %d functions, want %d", name, len(got), len(want))
					continue
				}
				for i := range want {
					w, g := *want[i], *got[i]
					if w.Name != g.Name || w.Module != g.Module || !slices.Equal(w.Addrs, g.Addrs) || w.Copies != g.Copies ||
						w.BTFID != g.BTFID || w.Traceable != g.Traceable || w.Reason != g.Reason || w.ProtoNote != g.ProtoNote ||
						w.AddrNote != g.AddrNote || (w.Proto() == nil) != (g.Proto() == nil) || w.Proto() != nil && Prototype(w.Proto()) != Prototype(g.Proto()) {
						t.Errorf("%s:\n got %+v\nwant %+v", name, g, w)
					}
					for _, a := range w.Addrs {
						ws, wo, wok := full.Symbolizer().Symbolize(a + 1)
						gs, gotOff, gok := part.Symbolizer().Symbolize(a + 1)
						if ws != gs || wo != gotOff || wok != gok {
							t.Errorf("%#x: symbolised %s+%d %v, want %s+%d %v", a+1, gs, gotOff, gok, ws, wo, wok)
						}
					}
				}
			}
		})
	}
}

// TestNotraceCopy checks that a traceable function counts the copies of
// its name kallsyms lists beyond the traceable set: the kernel resolves a
// trampoline's target by name and may find the other one.
func TestNotraceCopy(t *testing.T) {
	fsys := fixture(t, func(name string, data []byte) []byte {
		if strings.HasSuffix(name, "kallsyms") {
			data = append(data, "ffffffff81000010 t tcp_sendmsg\n"...)
		}
		return data
	})
	if f := only(t, load(t, fsys), "tcp_sendmsg"); !f.Traceable || f.Copies != 2 || len(f.Addrs) != 1 {
		t.Errorf("tcp_sendmsg with a notrace copy: %+v, want traceable, 2 copies, 1 address", f)
	}
	// A catalogue of some names reads the names of the traceable
	// functions, then their addresses for a name with an untraceable copy.
	part, err := LoadNames(fsys, []string{"tcp_sendmsg"})
	if err != nil {
		t.Fatal(err)
	}
	if f := only(t, part, "tcp_sendmsg"); !f.Traceable || f.Copies != 2 || len(f.Addrs) != 1 || part.Source() != FromFilterAddrs {
		t.Errorf("tcp_sendmsg with a notrace copy, named: %+v from %s, want traceable, 2 copies, 1 address, from %s", f, part.Source(), FromFilterAddrs)
	}
}

// TestAllTraceable checks that a catalogue of some names lists every
// traceable function by name, as one of every function does, and none
// when tracefs cannot be read.
func TestAllTraceable(t *testing.T) {
	names := func(syms []Symbol) []string {
		var out []string
		for _, s := range syms {
			out = append(out, s.Module+":"+s.Name)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for name, fsys := range map[string]fs.FS{"addrs": fixture(t, nil), "names": fixture(t, nil, filterAddrs)} {
		full := load(t, fsys)
		part, err := LoadNames(fsys, []string{"vfs_read"})
		if err != nil {
			t.Fatal(err)
		}
		if len(part.Traceable()) >= len(full.Traceable()) {
			t.Fatalf("%s: the catalogue of one name has %d traceable functions of %d", name, len(part.Traceable()), len(full.Traceable()))
		}
		if got, want := names(part.AllTraceable()), names(full.AllTraceable()); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	part, err := LoadNames(fixture(t, nil, filterAddrs, filterNames), []string{"vfs_read"})
	if err != nil {
		t.Fatal(err)
	}
	if got := part.AllTraceable(); got != nil {
		t.Errorf("without tracefs: %v, want none", got)
	}
}
