//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* The floor: the least a tracer must do to report one call of
 * bpf_fentry_test1 with its duration, task, argument and return value.
 * trawl itself never loads these programs: trawl-bench measures them beside
 * trawl's capture program, so that its per-call table shows how much of
 * trawl's cost is the price of any call record and how much is trawl's own
 * (plans, nesting, filters, counters).
 *
 * The entry keeps the entry time (and for kprobes the argument, whose
 * register is gone at the exit) in task storage; the exit writes one
 * record into a ring buffer. No plan, no shadow stack, no filter, no
 * counter: a nested or missed call simply gets a wrong duration. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "kernel.h"

char LICENSE[] SEC("license") = "GPL";

struct floor_record {
	__u64 entry_ts;
	__u64 exit_ts;
	__u64 arg;
	__u64 ret;
	__u32 tgid;
	__u32 pid;
	char comm[16];
};

struct floor_entry {
	__u64 ts;
	__u64 arg;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct floor_entry);
} entries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} floor_events SEC(".maps");

static __always_inline void keep_entry(__u64 arg)
{
	struct floor_entry *e = bpf_task_storage_get(&entries, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (e) {
		e->ts = bpf_ktime_get_ns();
		e->arg = arg;
	}
}

/* send_call sends the call: trampolines pass its argument, kprobes take the
 * one kept at entry. */
static __always_inline void send_call(__u64 arg, __u64 ret, int kprobe)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct floor_entry *e = bpf_task_storage_get(&entries, t, 0, 0);
	struct floor_record *r;

	if (!e || !(r = bpf_ringbuf_reserve(&floor_events, sizeof(*r), 0)))
		return;
	r->entry_ts = e->ts;
	r->exit_ts = bpf_ktime_get_ns();
	r->arg = kprobe ? e->arg : arg;
	r->ret = ret;
	r->tgid = t->tgid;
	r->pid = t->pid;
	read_comm(t, (__u64 *)r->comm);
	bpf_ringbuf_submit(r, 0);
}

SEC("fentry/bpf_fentry_test1")
int floor_fentry(void *ctx)
{
	keep_entry(0);
	return 0;
}

SEC("fexit/bpf_fentry_test1")
int floor_fexit(__u64 *ctx)
{
	send_call(ctx[0], ctx[1], 0);
	return 0;
}

SEC("kprobe.multi")
int floor_kprobe(void *ctx)
{
	keep_entry(arg_reg(ctx, 0));
	return 0;
}

SEC("kretprobe.multi")
int floor_kretprobe(void *ctx)
{
	send_call(0, ctx_u64(ctx, REG_RET), 1);
	return 0;
}

/* The stats floor: the least a tracer must do to count a call and its
 * duration in the kernel, as --stats does: per-CPU counts of calls, their
 * total time and a log2 histogram of durations, no record. The entry time
 * is kept in task storage (fentry, kprobe.multi: the entry programs above)
 * or in the session cookie (kprobe.session, fsession). No plan, no error,
 * no filter: what is left of trawl's --stats cost over this is its own. */
struct floor_stats {
	__u64 calls;
	__u64 total_ns;
	__u64 hist[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct floor_stats);
} floor_counts SEC(".maps");

/* count_call counts a call that took ns. */
static __always_inline void count_call(__u64 ns)
{
	__u32 zero = 0;
	struct floor_stats *st = bpf_map_lookup_elem(&floor_counts, &zero);

	if (!st)
		return;
	st->calls++;
	st->total_ns += ns;
	st->hist[log2_floor(ns) & 63]++;
}

/* count_exit counts the call whose entry time keep_entry kept. */
static __always_inline void count_exit(void)
{
	struct floor_entry *e = bpf_task_storage_get(&entries, bpf_get_current_task_btf(), 0, 0);

	if (e)
		count_call(bpf_ktime_get_ns() - e->ts);
}

SEC("fexit/bpf_fentry_test1")
int floor_stats_fexit(void *ctx)
{
	count_exit();
	return 0;
}

SEC("kretprobe.multi")
int floor_stats_kretprobe(void *ctx)
{
	count_exit();
	return 0;
}

/* The session kfuncs take ctx from 7.0 and nothing before: trawl-bench
 * resolves these calls as trawl does (internal/backend, ResolveKfuncs). */
extern _Bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

/* count_session keeps the entry time in the session cookie and counts
 * the call at its exit. */
static __always_inline void count_session(void *ctx)
{
	__u64 *cookie = bpf_session_cookie(ctx);

	if (!cookie)
		return;
	if (!bpf_session_is_return(ctx))
		*cookie = bpf_ktime_get_ns();
	else
		count_call(bpf_ktime_get_ns() - *cookie);
}

SEC("kprobe.session")
int floor_stats_ksession(void *ctx)
{
	count_session(ctx);
	return 0;
}

SEC("fsession/bpf_fentry_test1")
int floor_stats_fsession(void *ctx)
{
	count_session(ctx);
	return 0;
}
