/* SPDX-License-Identifier: GPL-2.0 */
/* The trampoline programs, part of capture.c: fentry and fexit
 * (internal/backend/fentry.go), fsession (fsession.go) and fsession.multi
 * (tracingmulti.go). */
#ifndef TRAWL_TRAMPOLINE_H
#define TRAWL_TRAMPOLINE_H

/* The trampoline programs take the gate's short way first (gated_out at
 * entry; at exit, nothing while no gate is open), and trace a call in a
 * function of their own, not inlined, so that the short way pays for no
 * more registers than it uses. With --stack, entries trace inline:
 * bpf_get_stackid unwinds every frame between the program and the traced
 * function, and a BPF frame costs about 800 instructions (amd64-7.3). */

/* trampoline_call traces a call of plan index func at its entry: fsession
 * programs (session set) also note it in the session cookie. */
static __always_inline void trampoline_call(void *ctx, __u32 func, int session)
{
	struct shadow *s;
	const struct plan *p;
	struct call *c;
	__u32 d;
	int skip;

	p = bpf_map_lookup_elem(&plans, &func);
	if (!p)
		return;
	if (session)
		c = session_entry(ctx, func, p, &d, &skip, 0);
	else
		c = push(ctx, &s, &d, func, p, (__u64)ctx, 0);
	if (c)
		enter(ctx, c, d, p, 0);
}

static APART int fentry_call_apart(void *ctx, __u32 func)
{
	trampoline_call(ctx, func, 0);
	return 0;
}

static APART int fsession_call_apart(void *ctx, __u32 func)
{
	trampoline_call(ctx, func, 1);
	return 0;
}

/* trampoline_exit ends a call at its exit. */
static APART int trampoline_exit(void *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	finish_exit(ctx, ret, 0);
	return 0;
}

SEC("fentry/trawl_placeholder")
int fentry_capture(void *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);

	if (gated_out(cookie))
		return 0;
	if (!want_stack)
		return fentry_call_apart(ctx, cookie);
	trampoline_call(ctx, cookie, 0);
	return 0;
}

SEC("fexit/trawl_placeholder")
int fexit_capture(void *ctx)
{
	if (entry_gate && !open_gates)
		return 0; /* outside every entry call: see outside_exit */
	return trampoline_exit(ctx);
}

/* Loaded through internal/kernel/rawbpf as fsession (7.0) or
 * fsession.multi (7.2, x86-64): cilium/ebpf v0.22 cannot attach either. */
/* fsession_return ends a call at its exit. */
static APART int fsession_return(void *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	session_exit(ctx, ret, 0);
	return 0;
}

SEC("fsession/trawl_placeholder")
int fsession_capture(void *ctx)
{
	__u64 ret = 0, cookie;

	if (armed == ARM_OFF)
		return 0;
	if (bpf_session_is_return(ctx)) {
		if (lean_stats) {
			bpf_get_func_ret(ctx, &ret);
			lean_exit(ctx, ret);
			return 0;
		}
		if (entry_gate && !open_gates)
			return 0; /* outside every entry call: see outside_exit */
		return fsession_return(ctx);
	}
	if (lean_stats) {
		lean_entry(ctx, bpf_get_attach_cookie(ctx));
		return 0;
	}
	/* A call left out keeps its session cookie 0, as the trampoline
	 * clears it: its exit, if a gate opens meanwhile, pops nothing. */
	cookie = bpf_get_attach_cookie(ctx);
	if (gated_out(cookie))
		return 0;
	if (!want_stack)
		return fsession_call_apart(ctx, cookie);
	trampoline_call(ctx, cookie, 1);
	return 0;
}

#endif
