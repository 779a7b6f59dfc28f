/* SPDX-License-Identifier: GPL-2.0 */
/* --stats, part of capture.c: calls counted in the kernel, per function,
 * with their durations and errors (aggregate.go). */
#ifndef TRAWL_AGGREGATE_H
#define TRAWL_AGGREGATE_H

volatile const __u32 aggregate = 0; /* --stats: count calls in stats, send none */

/* --stats: each function's calls that passed the filters and its other
 * figures (at its plan's index), and its errors by errno. All have one
 * entry unless the loader sizes them. The calls are apart from the rest so
 * that user space finds the functions called by reading 8 bytes of each,
 * not every page of stats (2 KiB a function). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} call_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct func_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct errno_key);
	__type(value, __u64);
} errnos SEC(".maps");

/* hist_bucket returns the histogram bucket of a duration of ns. */
static __always_inline __u32 hist_bucket(__u64 ns)
{
	__u32 e, i;

	if (ns < HIST_EXACT)
		return ns;
	e = log2_floor(ns);
	i = HIST_EXACT + ((e - 4) << HIST_SUB_BITS) + ((ns >> (e - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1));
	return i < HIST_BUCKETS ? i : HIST_BUCKETS - 1;
}

/* count_errno counts an error of func in errnos. */
static __always_inline void count_errno(__u32 func, const struct plan *p, __u64 ret)
{
	struct errno_key k = {.func = func};
	__u64 one = 1, *n;
	__s64 v = ret;

	if (p->err_kind == ERR_NEG && p->ret_size == 4)
		v = (__s32)ret;
	else if (p->err_kind == ERR_NEG && p->ret_size == 2)
		v = (__s16)ret;
	else if (p->err_kind == ERR_NEG && p->ret_size == 1)
		v = (__s8)ret;
	k.err = ret ? -v : 0;
	n = bpf_map_lookup_elem(&errnos, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	if (!bpf_map_update_elem(&errnos, &k, &one, BPF_NOEXIST))
		return;
	/* Another CPU may have added it meanwhile. */
	n = bpf_map_lookup_elem(&errnos, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		count(CNT_MISS_ERRNO);
}

/* tally counts a call of func that returned ret in its figures, with its
 * duration if its entry was seen. */
static __always_inline void tally(__u32 func, int entry, __u64 dur, __u64 ret)
{
	struct func_stats *st = bpf_map_lookup_elem(&stats, &func);
	__u64 *calls = bpf_map_lookup_elem(&call_counts, &func);
	const struct plan *p;

	if (!st || !calls)
		return;
	__sync_fetch_and_add(calls, 1);
	if (entry) {
		__sync_fetch_and_add(&st->total_ns, dur);
		__sync_fetch_and_add(&st->hist[hist_bucket(dur) & (HIST_BUCKETS - 1)], 1);
		if (dur > st->max_ns)
			st->max_ns = dur;
	}
	p = bpf_map_lookup_elem(&plans, &func);
	if (p && is_error(p, ret)) {
		__sync_fetch_and_add(&st->errors, 1);
		count_errno(func, p, ret);
	}
}

#endif
