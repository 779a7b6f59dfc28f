/* SPDX-License-Identifier: GPL-2.0 */
/* --stats, part of capture.c: calls counted in the kernel, per function,
 * with their durations and errors (aggregate.go). */
#ifndef TRAWL_AGGREGATE_H
#define TRAWL_AGGREGATE_H

volatile const __u32 aggregate = 0; /* --stats: count calls in stats, send none */

/* --stats: each function's calls that passed the filters (at its plan's
 * index), and its other figures, made at its first call. All have one
 * entry unless the loader sizes them. The calls are an array user space
 * maps, 8 bytes a function; the figures (2 KiB a function) a hash that
 * holds the functions called only, which user space reads in batches:
 * with every function attached, a few thousand are called, and an array
 * of them all, mapped, put 100 MB into trawl. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} call_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct func_stats);
} stats SEC(".maps");

/* A function's figures before its first call: never written. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct func_stats);
} no_stats SEC(".maps");

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

/* figures_of returns the figures of func, made at its first call, or
 * NULL, counted in CNT_MISS_FIGURES, when the map refuses them (its
 * bucket busy in a program this one interrupted). */
static __always_inline struct func_stats *figures_of(__u32 func)
{
	struct func_stats *st = bpf_map_lookup_elem(&stats, &func);
	__u32 zero = 0;
	void *none;

	if (st)
		return st;
	none = bpf_map_lookup_elem(&no_stats, &zero);
	if (!none)
		return NULL;
	/* Another CPU may add them first: then both look them up. */
	bpf_map_update_elem(&stats, &func, none, BPF_NOEXIST);
	st = bpf_map_lookup_elem(&stats, &func);
	if (!st)
		count(CNT_MISS_FIGURES);
	return st;
}

/* tally counts a call of func that returned ret in its figures, with its
 * duration if its entry was seen. */
static __always_inline void tally(__u32 func, int entry, __u64 dur, __u64 ret)
{
	__u64 *calls = bpf_map_lookup_elem(&call_counts, &func);
	struct func_stats *st;
	const struct plan *p;

	if (!calls)
		return;
	__sync_fetch_and_add(calls, 1);
	st = figures_of(func);
	if (!st)
		return;
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
