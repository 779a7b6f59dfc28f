// SPDX-License-Identifier: Apache-2.0

package selector

import (
	"errors"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/kernel"
)

func catalogue(t testing.TB) *kernel.Catalogue {
	t.Helper()
	c, err := kernel.Load(os.DirFS("../kernel/testdata/amd64"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func names(fns []*kernel.Function) []string {
	var out []string
	for _, f := range fns {
		out = append(out, f.Name)
	}
	return out
}

func TestSelect(t *testing.T) {
	c := catalogue(t)
	for _, tc := range []struct {
		patterns []string
		want     []string
	}{
		{[]string{"vfs_*"}, []string{"vfs_read", "vfs_write"}},
		{[]string{"/^vfs_(read|write)$/"}, []string{"vfs_read", "vfs_write"}},
		{[]string{"/_rcv$/", "vfs_read"}, []string{"tcp_v4_rcv", "vfs_read"}},
		{[]string{"vfs_*", "!vfs_write"}, []string{"vfs_read"}},
		{[]string{"vfs_*", "!/write/"}, []string{"vfs_read"}},
		{[]string{"nf_conntrack:*"}, []string{"nf_conntrack_in", "nf_ct_get_tuple"}},
		{[]string{"nf_*:nf_ct_*"}, []string{"nf_ct_get_tuple"}},
		{[]string{"vmlinux:nf_*"}, []string{"NF_HOOK.constprop.0"}[:0]},
		{[]string{"*(struct sock *)"}, []string{"ip_finish_output2", "tcp_sendmsg", "tcp_v4_send_reset.llvm.4077523316537185513"}},
		{[]string{"(struct sock*, size_t)"}, []string{"tcp_sendmsg"}},
		{[]string{"*(const   char *)"}, []string{"_printk", "vfs_read", "vfs_write"}}, // const is ignored
		{[]string{"tcp_*(struct sk_buff *)", "!tcp_v4_send_reset*"}, []string{"tcp_v4_rcv"}},
		{[]string{"NF_HOOK*"}, []string{"NF_HOOK.constprop.0"}},
		{[]string{"ZSTD_CCtx_set?Params"}, []string{"ZSTD_CCtx_setCParams", "ZSTD_CCtx_setFParams"}},
	} {
		t.Run(strings.Join(tc.patterns, " "), func(t *testing.T) {
			sel, err := Select(c, tc.patterns)
			if len(tc.want) == 0 {
				if !errors.Is(err, ErrNoMatch) {
					t.Fatalf("got %v, want ErrNoMatch", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(sel.Selected); !slices.Equal(got, tc.want) {
				t.Errorf("selected %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExcludedWithReasons(t *testing.T) {
	sel, err := Select(catalogue(t), []string{"!vfs_*"})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, ex := range sel.Excluded {
		reasons[ex.Func.Name] = ex.Reason
	}
	for name, want := range map[string]string{
		"vfs_read":                   "excluded by !vfs_*",
		"migrate_disable":            "btf_id_deny",
		"bpf_ringbuf_submit":         "recurse",
		"native_sched_clock":         "notrace",
		"acpi_processor_driver_exit": "not in /proc/kallsyms",
	} {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("%s excluded for %q, want a reason containing %q", name, reasons[name], want)
		}
	}
	if slices.Contains(names(sel.Selected), "migrate_disable") {
		t.Error("a denied function is selected")
	}
}

func TestSelectErrors(t *testing.T) {
	c := catalogue(t)
	for _, tc := range []struct {
		patterns []string
		is       error
		want     string
	}{
		{[]string{"nosuch_*"}, ErrNoMatch, `pattern "nosuch_*" matches no function`},
		{[]string{"migrate_disable"}, ErrNoMatch, "none can be traced (migrate_disable: on the kernel's fentry deny list"},
		{[]string{"vfs_*", "!vfs_*"}, ErrNoMatch, `"vfs_*" matches 2 functions`},
		{[]string{"/vfs_(read/"}, ErrBadPattern, "column 2: missing closing )"},
		{[]string{"tcp_*", "/a/(int)", "/x[/"}, ErrBadPattern, "column 3: missing closing ]"},
		{[]string{"x/y"}, ErrBadPattern, "cannot contain"},
		{[]string{"[abc"}, ErrBadPattern, "malformed"},
		{[]string{"/abc"}, ErrBadPattern, "closing '/'"},
		{[]string{"!"}, ErrBadPattern, "empty function name"},
		{[]string{":tcp"}, ErrBadPattern, "empty module"},
		{[]string{"tcp(int"}, ErrBadPattern, "parentheses"},
		{[]string{"tcp(int,)"}, ErrBadPattern, "empty argument type"},
		{[]string{"tcp)"}, ErrBadPattern, "')' without '('"},
		{nil, ErrBadPattern, "no pattern"},
	} {
		t.Run(strings.Join(tc.patterns, " "), func(t *testing.T) {
			_, err := Select(c, tc.patterns)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %v containing %q", err, tc.is, tc.want)
			}
		})
	}
}

func TestDeniedClone(t *testing.T) {
	if Denied(&kernel.Function{Name: "rcu_read_unlock_strict.isra.0"}) == "" {
		t.Error("a clone of a denied function is not denied")
	}
	if r := Denied(&kernel.Function{Name: "tcp_sendmsg"}); r != "" {
		t.Errorf("tcp_sendmsg denied: %s", r)
	}
}

// TestDeniedClock checks that the clocksource reads bpf_ktime_get_ns runs
// through are left out: traced, each call of the capture program missed
// them twice (arm64-7.3's arch_counter_read).
func TestDeniedClock(t *testing.T) {
	for _, name := range []string{"arch_counter_read", "arch_counter_read_cc", "read_hpet", "acpi_pm_read", "ktime_get_mono_fast_ns"} {
		if Denied(&kernel.Function{Name: name}) == "" {
			t.Errorf("%s is not denied", name)
		}
	}
}

// FuzzParse checks that Parse never panics and that what it accepts is
// consistent.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"tcp_*", "/^vfs_(read|write)$/", "!tcp_v6_*", "nf_conntrack:*", "*(struct sk_buff *)",
		"tcp_*(struct sock *, int)", "vmlinux:/x/(int)", "/a/b/", "[", "/(/", "!", ":", "()", "a(b(c))",
		"mod:!x", "/\\//", "x(,)", "/", "//", "*(void (*)(int))",
	} {
		f.Add(s)
	}
	fn := &kernel.Function{Name: "tcp_sendmsg", Traceable: true}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrBadPattern) {
				t.Fatalf("error %v is not ErrBadPattern", err)
			}
			return
		}
		if p.Exclude != strings.HasPrefix(s, "!") {
			t.Fatalf("Exclude %v for %q", p.Exclude, s)
		}
		p.Match(fn)
	})
}

// TestDenyMatchers checks that each deny rule's fast matcher agrees with
// path.Match on names that match it, miss it by a character, or hold it
// in the middle.
func TestDenyMatchers(t *testing.T) {
	for i, r := range denyList {
		inner := strings.Trim(r.glob, "*")
		for _, name := range []string{inner, inner + "_x", "x_" + inner, "x_" + inner + "_x", inner[1:], inner[:len(inner)-1], "tcp_sendmsg"} {
			want, _ := path.Match(r.glob, name)
			if got := denyRules.matchers[i](name); got != want {
				t.Errorf("%s matches %q: %v, path.Match says %v", r.glob, name, got, want)
			}
		}
	}
}

// TestDenyIndex checks that the deny list's index finds, for names near
// each rule's and for this machine's functions, the first rule a scan of
// every rule finds.
func TestDenyIndex(t *testing.T) {
	names := []string{"", "x", "tcp_sendmsg"}
	for _, r := range denyList {
		inner := strings.Trim(r.glob, "*")
		names = append(names, inner, inner+"_x", "x_"+inner, inner[:1], inner[:len(inner)-1])
	}
	if c, err := kernel.Load(os.DirFS("/")); err == nil {
		for _, fn := range c.Functions() {
			names = append(names, fn.Name)
		}
	}
	for _, name := range names {
		want := -1
		for i, match := range denyRules.matchers {
			if match(name) {
				want = i
				break
			}
		}
		if got := denyRules.first(name); got != want {
			t.Errorf("%q: rule %d, a scan finds %d", name, got, want)
		}
	}
}

func TestLiteralNames(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		want     []string // nil: not literal
	}{
		{[]string{"vfs_read"}, []string{"vfs_read"}},
		{[]string{"vfs_read", "ext4:ext4_sync_file", "!vfs_write"}, []string{"vfs_read", "ext4_sync_file"}},
		{[]string{"tcp_sendmsg(struct sock *)"}, []string{"tcp_sendmsg"}},
		{[]string{"/^(vfs_read|vfs_write)$/"}, []string{"vfs_read", "vfs_write"}},
		{[]string{"/^vfs_read$/"}, []string{"vfs_read"}},
		{[]string{"vmlinux:/^(?:vfs_read|vfs_write)$/"}, []string{"vfs_read", "vfs_write"}},
		{[]string{"vfs_*"}, nil},
		{[]string{"vfs_rea?"}, nil},
		{[]string{"/vfs_read/"}, nil},
		{[]string{"/^(vfs_read|vfs_.*)$/"}, nil},
		{[]string{"/^vfs_read$|^x$/"}, nil},
		{[]string{"/^(a)|(b)$/"}, nil},
		{[]string{"(struct sk_buff *)"}, nil},
		{[]string{"vfs_read", "tcp_*"}, nil},
		{[]string{"!vfs_read"}, nil},
		{[]string{"bad(("}, nil},
	} {
		got, ok := LiteralNames(tc.patterns)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q %v, want %q", tc.patterns, got, ok, tc.want)
		}
	}
}

func TestTracepointPatterns(t *testing.T) {
	exec := &kernel.Function{Name: "tp:sched:sched_process_exec", Event: "sched_process_exec", Subsystem: "sched", Traceable: true}
	kfree := &kernel.Function{Name: "tp:skb:kfree_skb", Event: "kfree_skb", Subsystem: "skb", Traceable: true}
	fn := &kernel.Function{Name: "kfree_skb", Traceable: true}
	for _, tc := range []struct {
		pattern string
		matches []*kernel.Function
	}{
		{"tp:sched:*", []*kernel.Function{exec}},
		{"tp:sched", []*kernel.Function{exec}},
		{"tp:*", []*kernel.Function{exec, kfree}},
		{"tp:*:kfree_skb", []*kernel.Function{kfree}},
		{"tp:s*:*exec", []*kernel.Function{exec}},
		{"!tp:skb:kfree_skb", []*kernel.Function{kfree}},
		{"kfree_skb", []*kernel.Function{fn}}, // a function pattern takes no tracepoint
	} {
		p, err := Parse(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		for _, f := range []*kernel.Function{exec, kfree, fn} {
			if got, want := p.Match(f), slices.Contains(tc.matches, f); got != want {
				t.Errorf("%s matches %s: %v, want %v", tc.pattern, f.Name, got, want)
			}
		}
	}
	for _, bad := range []string{"tp:", "tp:sched:", "tp::x", "tp:sched:a:b", "tp:sched:[", "tp:/sched/"} {
		if _, err := Parse(bad); !errors.Is(err, ErrBadPattern) {
			t.Errorf("%s: got %v, want ErrBadPattern", bad, err)
		}
	}
	if p, err := Parse("tp:*:*(struct sk_buff*)"); err != nil || !p.Tracepoint || !slices.Equal(p.ArgTypes, []string{"struct sk_buff *"}) {
		t.Errorf("tracepoints taking an skb: %+v, %v", p, err)
	}
	if names, ok := LiteralNames([]string{"vfs_read", "tp:sched:sched_switch"}); ok {
		t.Errorf("LiteralNames: %v, want the whole catalogue for a tracepoint", names)
	}
}
