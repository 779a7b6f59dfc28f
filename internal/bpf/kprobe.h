/* SPDX-License-Identifier: GPL-2.0 */
/* The kprobe programs serving many functions, part of capture.c:
 * kprobe.multi, kretprobe.multi and kprobe.session
 * (internal/backend/kprobemulti.go). */
#ifndef TRAWL_KPROBE_H
#define TRAWL_KPROBE_H

/* kprobe_plan finds a kprobe program's plan by the function's address. */
static __always_inline const struct plan *kprobe_plan(void *ctx, __u64 ip, __u32 *func)
{
	*func = func_at(ctx, ip);
	return bpf_map_lookup_elem(&plans, func);
}

SEC("kprobe.multi")
int kprobe_capture(void *ctx)
{
	struct shadow *s;
	const struct plan *p;
	struct call *c;
	__u32 func, d;
	__u64 ip;

	if (armed != ARM_ON)
		return 0;
	ip = bpf_get_func_ip(ctx);
	p = kprobe_plan(ctx, ip, &func);
	if (!p || !(c = push(ctx, &s, &d, func, p, ctx_u64(ctx, REG_SP), 1)))
		return 0;
	c->ip = ip;
	kprobe_slots(ctx, c->slots, p);
	enter(ctx, c, d, p, 1);
	return 0;
}

SEC("kretprobe.multi")
int kretprobe_capture(void *ctx)
{
	if (armed == ARM_OFF)
		return 0;
	finish_exit(ctx, ctx_u64(ctx, REG_RET), 1);
	return 0;
}

SEC("kprobe.session")
int kprobe_session_capture(void *ctx)
{
	const struct plan *p;
	struct call *c;
	__u32 func, d;
	int skip;

	if (bpf_session_is_return(ctx)) {
		if (lean_stats)
			lean_exit(ctx, ctx_u64(ctx, REG_RET));
		else
			session_exit(ctx, ctx_u64(ctx, REG_RET), 1);
		return 0;
	}
	if (armed != ARM_ON)
		return 1; /* and skip the exit */
	if (lean_stats)
		return lean_entry(ctx, func_at(ctx, bpf_get_func_ip(ctx)));
	p = kprobe_plan(ctx, bpf_get_func_ip(ctx), &func);
	if (!p)
		return 1;
	c = session_entry(ctx, func, p, &d, &skip, 1);
	if (!c)
		return skip;
	kprobe_slots(ctx, c->slots, p);
	enter(ctx, c, d, p, 1);
	return 0;
}

#endif
