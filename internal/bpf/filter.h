/* SPDX-License-Identifier: GPL-2.0 */
/* The filters of a call, part of capture.c: --filter and --show
 * expressions (internal/filter, filters.go, show.go), --min-duration,
 * --errors and --errno (filters.go, entry.go). */
#ifndef TRAWL_FILTER_H
#define TRAWL_FILTER_H

/* Filters. Every backend gets them through shared helpers, so a new
 * program needs no filter code of its own if it keeps this shape:
 *
 *   entry: c = push(...)                  -> wanted(): pid, comm, cgroup
 *          kprobes: fill c->slots
 *          enter(ctx, c, ...)             -> capture(): copies memory and
 *                                            runs --filter on arguments
 *   exit:  finish_exit() or, for sessions, finish() with the cookie's call
 *                                         -> exit_passes(): --min-duration,
 *                                            --errors; emit(): --filter
 *                                            using ret
 *
 * A call the entry filter refuses stays on the shadow stack, flagged
 * CALL_DROP, so that its exit still pops it and then drops it.
 *
 * --filter expressions are compiled per function by internal/filter into
 * the body of trawl_filter, which the loader splices into each program
 * that calls it: for a program serving many functions, the body dispatches
 * on r->func. */
enum filter_place {
	FILTER_AT_ENTRY = 1, /* the expression uses arguments only */
	FILTER_AT_EXIT = 2,  /* the expression uses ret */
};

/* Set by the loader. */
FEATURE(__u64 min_duration) = 0;  /* only calls this long (ns) */
FEATURE(__u32 filter_errors) = 0; /* only calls returning an error */
FEATURE(__u32 filter_at) = 0;     /* where trawl_filter runs: FILTER_AT_* */
FEATURE(__u32 show_on) = 0;       /* some plans have PLAN_SHOW (--show) */

/* trawl_filter returns whether call r passes the --filter expression (at
 * exit, r->ret is set). The loader replaces this body; being global, it is
 * verified on its own, against this prototype (r may be NULL as far as the
 * verifier knows). */
__noinline int trawl_filter(struct record *r)
{
	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(r));
	return r != 0;
}

/* --show: expressions compiled per function by internal/filter into the
 * body of trawl_show, which the loader splices in as for trawl_filter. It
 * runs when a framed call returns, after its captures, and appends the
 * values to the frame's data. Being global, it is verified on its own,
 * against this prototype: f may be NULL, and its whole frame is writable. */
__noinline int trawl_show(struct frame *f)
{
	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(f));
	return f != 0;
}

/* entry_passes runs an arguments-only --filter expression at entry. */
static __always_inline int entry_passes(struct frame *f)
{
	if (filter_at != FILTER_AT_ENTRY || trawl_filter(&f->rec))
		return 1;
	count(CNT_FILTERED_EXPR);
	return 0;
}

#define MAX_ERRNO 4095

/* is_error says whether a function of plan p returned an error. */
static __always_inline int is_error(const struct plan *p, __u64 ret)
{
	__s64 v = ret;

	if (p->err_kind == ERR_PTR)
		return ret == 0 || ret >= (__u64)-MAX_ERRNO;
	if (p->err_kind != ERR_NEG)
		return 0;
	if (p->ret_size == 1)
		v = (__s8)ret;
	else if (p->ret_size == 2)
		v = (__s16)ret;
	else if (p->ret_size == 4)
		v = (__s32)ret;
	return v < 0 && v >= -MAX_ERRNO;
}

/* --errno: bit e of errno_kept keeps errno e; bit 0 keeps NULL pointers.
 * Unused unless filter_errno is set. */
FEATURE(__u32 filter_errno) = 0;
FEATURE(__u64 errno_kept[(MAX_ERRNO + 1) / 64]) = {};
/* errno_of returns the error number of the error ret, which a function
 * of plan p returned: 0 for a NULL pointer. */
static __always_inline __u32 errno_of(const struct plan *p, __u64 ret)
{
	__s64 v = ret;

	if (p->ret_size == 1)
		v = (__s8)ret;
	else if (p->ret_size == 2)
		v = (__s16)ret;
	else if (p->ret_size == 4)
		v = (__s32)ret;
	if (v < 0 && v >= -MAX_ERRNO)
		return -v;
	return 0;
}

/* errno_passes runs --errno on a call of plan p that returned the error
 * ret. */
static __always_inline int errno_passes(const struct plan *p, __u64 ret)
{
	__u32 e;

	if (!filter_errno)
		return 1;
	e = errno_of(p, ret);
	return errno_kept[(e >> 6) & ((MAX_ERRNO + 1) / 64 - 1)] >> (e & 63) & 1;
}

/* exit_passes runs --min-duration and --errors on a call that took dur
 * ns (0: its entry was missed) and returned ret. */
static __always_inline int exit_passes(__u32 func, __u64 dur, __u64 ret)
{
	const struct plan *p;

	if (min_duration && dur < min_duration) {
		count(CNT_FILTERED_EXIT);
		return 0;
	}
	if (filter_errors && (!(p = bpf_map_lookup_elem(&plans, &func)) || !is_error(p, ret) || !errno_passes(p, ret))) {
		count(CNT_FILTERED_EXIT);
		return 0;
	}
	return 1;
}

#endif
