// SPDX-License-Identifier: Apache-2.0

package selector

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/kernel"
)

func TestSuggest(t *testing.T) {
	names := []string{"tcp_sendmsg", "tcp_sendmsg", "tcp_sendpage", "udp_sendmsg", "vfs_read", "vfs_readv", "vfs_write",
		"kfree", "kmalloc", "schedule", "do_sys_open", "do_sys_openat2", "__x64_sys_openat", "__ia32_sys_openat"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"tcp_sendmsgg", []string{"tcp_sendmsg"}}, // inserted, and listed twice
		{"tpc_sendmsg", []string{"tcp_sendmsg"}},  // swapped
		{"tcp_sendmgs", []string{"tcp_sendmsg"}},  // swapped at the end
		{"vfs_reed", []string{"vfs_read"}},        // replaced
		{"vfs_rea", []string{"vfs_read"}},         // deleted
		{"fs_read", []string{"vfs_read"}},         // deleted at the start
		{"kfre", []string{"kfree"}},               // a short name: one edit
		{"do_sys_open2", []string{"do_sys_open"}}, // the nearest only, not do_sys_openat2
		{"vfs_reaf", []string{"vfs_read"}},        // not vfs_readv, 2 edits
		{"x64_sys_openat", []string{"__x64_sys_openat"}},
		{"__ia32_sys_openat_", []string{"__ia32_sys_openat"}},
		{"vfs_rxxd", nil},       // 2 edits for 8 characters: too far
		{"tcp_sendxxxx", nil},   // 4 for 12
		{"tcp_sendmsgxyz", nil}, // 3 for 14
		{"sendmsg", nil},        // a part of many names, far from each
		{"vfs_raed_write_something_long", nil},
	} {
		if got := Suggest(tc.name, names); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// Ties are all offered, in order, up to maxSuggestions.
	if got, want := Suggest("abcd_x", []string{"abcd_d", "abcd_c", "abcd_b", "abcd_a", "abcd_xyz"}), []string{"abcd_a", "abcd_b", "abcd_c"}; !slices.Equal(got, want) {
		t.Errorf("abcd_x: %q, want %q", got, want)
	}
}

// TestEditDistance checks the bounded distance against the unbounded one
// worked out by hand.
func TestEditDistance(t *testing.T) {
	var d editDistance
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"abc", "abc", 0},
		{"abc", "acb", 1}, {"ca", "abc", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2},
		{"tcp_sendmsg", "udp_sendmsg", 2}, {"vfs_read", "vfs_write", 4},
	} {
		for limit := range 5 {
			want := min(tc.want, limit+1)
			if got := d.within(tc.a, tc.b, limit); got != want {
				t.Errorf("%q to %q within %d: %d, want %d", tc.a, tc.b, limit, got, want)
			}
			if got := d.within(tc.b, tc.a, limit); got != want {
				t.Errorf("%q to %q within %d: %d, want %d", tc.b, tc.a, limit, got, want)
			}
		}
	}
}

// TestSelectSuggests checks that a function named in full that matches
// nothing is told the nearest names, from a catalogue of every function
// and from one of only the names asked for, as a trace of named
// functions loads.
func TestSelectSuggests(t *testing.T) {
	fsys := os.DirFS("../kernel/testdata/amd64")
	full := catalogue(t)
	for _, tc := range []struct {
		patterns []string
		want     string
	}{
		{[]string{"tcp_sendmsgg"}, `pattern "tcp_sendmsgg" matches no function; did you mean tcp_sendmsg?`},
		{[]string{"vfs_read", "vfs_wrte"}, `pattern "vfs_wrte" matches no function; did you mean vfs_write?`},
		{[]string{"nf_conntrack:nf_conntrack_inn"}, `pattern "nf_conntrack:nf_conntrack_inn" matches no function; did you mean nf_conntrack:nf_conntrack_in?`},
		{[]string{"nf_*:nf_ct_get_tupl"}, `did you mean nf_*:nf_ct_get_tuple?`},
		{[]string{"vmlinux:nf_conntrack_inn"}, `pattern "vmlinux:nf_conntrack_inn" matches no function`},
		{[]string{"tcp_sendmsgg*"}, `pattern "tcp_sendmsgg*" matches no function`},
		{[]string{"/^tcp_sendmsgg$/"}, `pattern "/^tcp_sendmsgg$/" matches no function`},
		{[]string{"tcp_sendmsg(int)"}, `pattern "tcp_sendmsg(int)" matches no function`},
		{[]string{"xyzzy"}, `pattern "xyzzy" matches no function`},
	} {
		t.Run(strings.Join(tc.patterns, " "), func(t *testing.T) {
			names, _ := LiteralNames(tc.patterns)
			part, err := kernel.LoadNames(fsys, names)
			if err != nil {
				t.Fatal(err)
			}
			for what, c := range map[string]*kernel.Catalogue{"every function": full, "the names": part} {
				_, err := Select(c, tc.patterns)
				if !errors.Is(err, ErrNoMatch) || !strings.Contains(err.Error(), tc.want) ||
					!strings.Contains(tc.want, "did you mean") && strings.Contains(err.Error(), "did you mean") {
					t.Errorf("catalogue of %s: %v, want %s", what, err, tc.want)
				}
			}
		})
	}
}

// vmlinuxNames returns the names of the functions in the running kernel's
// BTF, as many as a kernel traces.
func vmlinuxNames(t testing.TB) []string {
	spec, err := btf.LoadSpec("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Skipf("no kernel BTF: %v", err)
	}
	var names []string
	for typ, err := range spec.All() {
		if err != nil {
			t.Fatal(err)
		}
		if fn, ok := typ.(*btf.Func); ok {
			names = append(names, fn.Name)
		}
	}
	return names
}

// TestSuggestKernel checks suggestions among the running kernel's
// functions, and that looking through them all takes little time.
func TestSuggestKernel(t *testing.T) {
	names := vmlinuxNames(t)
	for typo, want := range map[string]string{
		"tcp_sendmsgg": "tcp_sendmsg", "vfs_raed": "vfs_read", "do_sys_opnat2": "do_sys_openat2", "schedul": "schedule",
	} {
		start := time.Now()
		got := Suggest(typo, names)
		t.Logf("%s: %q among %d names in %v", typo, got, len(names), time.Since(start))
		if !slices.Contains(got, want) {
			t.Errorf("%s: %q, want %s among them", typo, got, want)
		}
	}
}

func BenchmarkSuggestKernel(b *testing.B) {
	names := vmlinuxNames(b)
	for b.Loop() {
		Suggest("tcp_sendmsgg", names)
	}
}
