// SPDX-License-Identifier: Apache-2.0

package selector

import (
	"path"
	"strings"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// denyRule is a glob of functions trawl never attaches to, and why.
type denyRule struct {
	glob   string
	reason string
}

// matcher returns a function that says whether a name matches the glob.
// The globs of denyList are names, prefixes ("x*") or infixes ("*x*"),
// which string comparisons match far faster than path.Match: with
// path.Match, checking every rule took most of selecting every function
// (0.7-1.7 s for 120,000 functions on a host, seconds under emulation).
func (r denyRule) matcher() func(string) bool {
	g := r.glob
	switch inner := strings.Trim(g, "*"); {
	case !strings.ContainsAny(g, `*?[\`):
		return func(name string) bool { return name == g }
	case !strings.ContainsAny(inner, `*?[\`) && g == inner+"*":
		return func(name string) bool { return strings.HasPrefix(name, inner) }
	case !strings.ContainsAny(inner, `*?[\`) && g == "*"+inner+"*":
		return func(name string) bool { return strings.Contains(name, inner) }
	}
	return func(name string) bool {
		ok, _ := path.Match(g, name)
		return ok
	}
}

const (
	reasonKernelDeny = "on the kernel's fentry deny list (btf_id_deny in kernel/bpf/verifier.c)"
	reasonRecursion  = "runs inside the BPF program or its attach path: tracing it would recurse"
	reasonDelicate   = "low-level function the tracing machinery depends on"
)

// denyList holds the functions that cannot or must not be traced. Sources:
//   - the kernel's btf_id_deny set (kernel/bpf/verifier.c), which the
//     verifier refuses for fentry/fexit: migrate_disable/enable (and
//     __migrate_enable, ___migrate_enable in newer kernels),
//     rcu_read_unlock_strict, preempt_count_add/sub,
//     __rcu_read_lock/unlock;
//   - retsnoop's enforced_deny_globs (src/mass_attacher.c): the trampoline
//     enter/exit helpers, RCU read lock, BPF spin locks,
//     bpf_get_smp_processor_id, update_prog_stats, inc_misses_counter;
//   - what trawl's own program and the kprobe.multi path run through
//     (ring buffer, probe reads, func IP and cookie helpers, fprobe and
//     rethook), and lockdep and irq-flag tracing that every one of them
//     calls into.
//
// Functions marked notrace never appear in the traceable set, so they need
// no rule here.
var denyList = []denyRule{
	{"migrate_disable", reasonKernelDeny},
	{"migrate_enable", reasonKernelDeny},
	{"__migrate_enable", reasonKernelDeny},
	{"___migrate_enable", reasonKernelDeny},
	{"rcu_read_unlock_strict", reasonKernelDeny},
	{"preempt_count_add", reasonKernelDeny},
	{"preempt_count_sub", reasonKernelDeny},
	{"__rcu_read_lock", reasonKernelDeny},
	{"__rcu_read_unlock", reasonKernelDeny},

	{"__bpf_prog_enter*", reasonRecursion},
	{"__bpf_prog_exit*", reasonRecursion},
	{"__bpf_tramp_enter*", reasonRecursion},
	{"__bpf_tramp_exit*", reasonRecursion},
	{"bpf_trampoline_*", reasonRecursion},
	{"update_prog_stats", reasonRecursion},
	{"inc_misses_counter", reasonRecursion},
	{"bpf_prog_start_time", reasonRecursion},
	{"bpf_get_smp_processor_id", reasonRecursion},
	{"*bpf_ringbuf_*", reasonRecursion},
	{"bpf_probe_read_*", reasonRecursion},
	{"copy_from_kernel_nofault*", reasonRecursion},
	{"copy_from_user_nofault", reasonRecursion},
	{"strncpy_from_kernel_nofault", reasonRecursion},
	{"strncpy_from_user_nofault", reasonRecursion},
	{"bpf_get_func_*", reasonRecursion},
	{"bpf_get_attach_cookie*", reasonRecursion},
	{"bpf_get_current_pid_tgid", reasonRecursion},
	{"bpf_ktime_get_ns", reasonRecursion},
	{"ktime_get_mono_fast_ns", reasonRecursion},
	// The clocksources' read functions, which bpf_ktime_get_ns runs
	// through: arm64's arch timer (traceable, unlike x86's read_tsc), and
	// the HPET and ACPI PM timers of machines without a stable TSC. On
	// arm64-7.3 every call of --stats '*' missed two calls of
	// arch_counter_read and ran the kprobe path for each.
	{"arch_counter_read*", reasonRecursion},
	{"clocksource_mmio_read*", reasonRecursion},
	{"read_hpet", reasonRecursion},
	{"acpi_pm_read*", reasonRecursion},
	{"bpf_session_*", reasonRecursion},
	{"kprobe_multi_link_*", reasonRecursion},
	{"bpf_kprobe_multi_*", reasonRecursion},
	{"fprobe_*", reasonRecursion},
	{"*rethook*", reasonRecursion},
	{"bpf_spin_lock", reasonDelicate},
	{"bpf_spin_unlock", reasonDelicate},
	{"rcu_read_lock*", reasonDelicate},
	{"rcu_read_unlock*", reasonDelicate},
	{"lock_acquire", reasonDelicate},
	{"lock_release", reasonDelicate},
	{"lock_is_held_type", reasonDelicate},
	{"lockdep_*", reasonDelicate},
	{"trace_hardirqs_*", reasonDelicate},
}

// Denied returns why trawl refuses to trace fn, or "" if it does not.
// Compiler clones share the verdict of the function they come from.
func Denied(fn *kernel.Function) string {
	base, _, _ := strings.Cut(fn.Name, ".")
	if i := denyRules.first(base); i >= 0 {
		return denyList[i].reason
	}
	return ""
}

// denyIndex finds the first rule of denyList a name matches by trying
// only the rules it can match: those naming it, the prefixes beginning
// with its first two bytes, and the others. Trying every rule took 0.15 s
// of selecting every function of arm64-7.3 under emulation.
type denyIndex struct {
	matchers []func(string) bool // of each rule, in order
	names    map[string]int      // the rules naming one function
	prefixes map[string][]int    // the rules "x*" by x's first two bytes
	others   []int
}

var denyRules = newDenyIndex(denyList)

func newDenyIndex(rules []denyRule) denyIndex {
	d := denyIndex{names: map[string]int{}, prefixes: map[string][]int{}}
	for i, r := range rules {
		d.matchers = append(d.matchers, r.matcher())
		prefix, isPrefix := strings.CutSuffix(r.glob, "*")
		switch {
		case !strings.ContainsAny(r.glob, `*?[\`):
			if _, ok := d.names[r.glob]; !ok {
				d.names[r.glob] = i
			}
		case isPrefix && len(prefix) >= 2 && !strings.ContainsAny(prefix, `*?[\`):
			d.prefixes[prefix[:2]] = append(d.prefixes[prefix[:2]], i)
		default:
			d.others = append(d.others, i)
		}
	}
	return d
}

// first returns the index of the first rule name matches, or -1.
func (d denyIndex) first(name string) int {
	first := -1
	try := func(i int) {
		if (first < 0 || i < first) && d.matchers[i](name) {
			first = i
		}
	}
	if i, ok := d.names[name]; ok {
		first = i
	}
	if len(name) >= 2 {
		for _, i := range d.prefixes[name[:2]] {
			try(i)
		}
	}
	for _, i := range d.others {
		try(i)
	}
	return first
}
