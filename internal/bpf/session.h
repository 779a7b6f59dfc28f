/* SPDX-License-Identifier: GPL-2.0 */
/* What the session programs share, part of capture.c: kprobe.session
 * (kprobe.h) and fsession (trampoline.h). */
#ifndef TRAWL_SESSION_H
#define TRAWL_SESSION_H

/* Session programs run once at entry and once at exit of each call, and
 * the two runs share an 8-byte cookie per call: kprobe.session (6.10) and
 * fsession (7.0; fsession.multi on the tracing_multi link, 7.2 x86-64).
 * Calls still live on the task's shadow stack, a call being too big for
 * the cookie; the cookie pairs entry and exit exactly: the entry
 * stores its depth + 1 there, and the exit pops to that depth, with no
 * search and no exit without its entry. An entry that keeps nothing leaves
 * the cookie 0; a kprobe.session entry also returns 1, and the kernel then
 * skips the exit run altogether (fsession programs must return 0).
 *
 * The session kfuncs take ctx from 7.0 and nothing before. The loader
 * resolves these calls itself (internal/backend), and the same
 * instructions pass both verifiers: a kfunc without parameters ignores r1. */
extern _Bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

/* session_entry pushes a call for func and notes its depth in the
 * session cookie (kprobe: of a kprobe.session program). It returns the
 * call, with its depth in *dp, or 0 with *skip set when the exit run is
 * not needed. */
static __always_inline struct call *session_entry(void *ctx, __u32 func, const struct plan *p, __u32 *dp, int *skip, int kprobe)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	struct shadow *s = 0;
	struct call *c;

	*skip = 1;
	if (!cookie)
		return 0;
	*cookie = 0;
	c = push(ctx, &s, dp, func, p, kprobe ? ctx_u64(ctx, REG_SP) : (__u64)ctx, kprobe);
	if (!s)
		return 0; /* filtered, or no task storage: nothing to pop */
	*cookie = s->depth; /* depth + 1 of this call */
	*skip = 0;
	return c;
}

/* session_exit pops the call, and calls above it whose exit was missed,
 * and sends it. */
static __always_inline void session_exit(void *ctx, __u64 ret, int kprobe)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	struct shadow *s;
	__u32 d;

	if (!cookie || !*cookie)
		return;
	s = get_shadow(0);
	if (!s)
		return;
	d = *cookie - 1;
	if (s->depth > d + 1)
		count(CNT_MISS_EXIT);
	if (d < MAX_DEPTH)
		finish(ctx, &s->calls[slot_of(d)], d, ret, kprobe);
	leave(s, d);
}

/* The lean --stats path of the session backends. When calls are only
 * counted, and nothing but the duration and the error decides which (no
 * --entry, --stack of either kind, --show or --filter expression), the
 * entry keeps the function and its start time in the session cookie, and
 * the exit counts the call: no shadow stack, no second lookup of the
 * function.
 * The time keeps its low LEAN_TS_BITS bits (4.9 hours): a duration is
 * their difference, exact for any call shorter than that. */
#define LEAN_TS_BITS 44
#define LEAN_TS_MASK ((1ULL << LEAN_TS_BITS) - 1)
#define lean_stats (aggregate && !entry_gate && !error_chains && !filter_at && !want_stack && !want_ustack && !show_on)

/* lean_entry notes a call of func in the session cookie. It returns
 * whether the exit run can be skipped. */
static __always_inline int lean_entry(void *ctx, __u32 func)
{
	__u64 *cookie = bpf_session_cookie(ctx);

	if (!cookie)
		return 1;
	*cookie = 0;
	if (armed != ARM_ON)
		return 1;
	if (!wanted()) {
		count(CNT_FILTERED);
		return 1;
	}
	*cookie = (__u64)(func + 1) << LEAN_TS_BITS | (bpf_ktime_get_ns() & LEAN_TS_MASK);
	return 0;
}

/* lean_exit counts the call whose entry lean_entry noted. */
static __always_inline void lean_exit(void *ctx, __u64 ret)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	__u64 noted, dur;
	__u32 func;

	if (!cookie || !(noted = *cookie))
		return;
	dur = (bpf_ktime_get_ns() - noted) & LEAN_TS_MASK;
	func = (noted >> LEAN_TS_BITS) - 1;
	count(CNT_CALLS);
	if (exit_passes(func, dur, ret))
		tally(func, 1, dur, ret);
}

#endif
