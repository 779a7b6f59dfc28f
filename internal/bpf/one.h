/* SPDX-License-Identifier: GPL-2.0 */
/* The programs serving one function each, part of capture.c, for kernels
 * whose programs cannot tell their function: kprobe and kretprobe
 * (internal/backend/kprobe.go), fentry and fexit before 5.17
 * (internal/backend/fentry.go), and tracepoints before 6.10 (tp_btf),
 * whose programs have no attach cookie; and the raw_tp program that
 * serves every tracepoint from 6.10 (internal/backend/tracepoint.go). */
#ifndef TRAWL_ONE_H
#define TRAWL_ONE_H

/* Classic kprobes and kretprobes (the kprobe backend), for kernels
 * without kprobe.multi: before 5.15 neither an attach cookie nor
 * bpf_get_func_ip tells a program its function, so the loader loads a copy
 * of these programs per function, in which trawl_func's body becomes
 * "r0 = ID; exit", ID the plan index (and trawl_nr_caps's its capture
 * count, as for fentry). Calls pair by ID at exit (held in
 * call.ip, which no other program of the session reads). */
static __noinline __u32 trawl_func(void)
{
	__u32 id = 0;

	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(id));
	return id;
}

/* one_exit ends a call of func, which returned ret, in a program that
 * serves func alone (kretprobe_one, fexit_one): its slots were saved at
 * entry. */
static __always_inline void one_exit(void *ctx, __u32 func, __u64 ret)
{
	struct shadow *s;
	__u32 d = 0;
	struct call *c;

	if (outside_exit())
		return;
	c = pop(func, &d, &s);
	if (c) {
		finish(ctx, c, d, ret, KPROBE_ONE);
		leave(s, d);
	} else
		exit_only(ctx, func, ret);
}

SEC("kretprobe/trawl_placeholder")
int kretprobe_one(void *ctx)
{
	one_exit(ctx, trawl_func(), ctx_u64(ctx, REG_RET));
	return 0;
}

/* Trampolines without bpf_get_func_arg/ret (before 5.17) nor attach
 * cookies (before 6.0): the fentry backend loads a copy of these per
 * function, which knows its plan index (trawl_func) and its slot count
 * (trawl_nr_slots, spliced as trawl_nr_caps is), and reads the slots and
 * the return value straight from the trampoline's context. The entry saves the slots in the call, as kprobes
 * do, for the exit to send. */
static __noinline __u64 trawl_nr_slots(void)
{
	__u64 n = 0;

	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(n));
	return n;
}

/* ctx_slots copies the first n slots of a trampoline's context, and
 * ctx_ret reads the return value an fexit context holds after them. They
 * copy the trampoline's stack, not load from ctx, as before 5.17 the
 * verifier lets a load from ctx take a pointer argument only when it
 * points to a struct. */
static __always_inline void ctx_slots(void *ctx, __u64 n, __u64 *slots)
{
	if (n > MAX_SLOTS)
		n = MAX_SLOTS;
	bpf_probe_read_kernel(slots, n * 8, ctx);
}

static __always_inline __u64 ctx_ret(void *ctx, __u64 n)
{
	__u64 ret = 0;

	bpf_probe_read_kernel(&ret, 8, (char *)ctx + 8 * n);
	return ret;
}

/* one_entry starts a call of func in a program that serves func alone
 * (kprobe_one, fentry_one, tp_btf_one) and saves its slots in the call for
 * the exit: from the registers a kprobe saw, or the trampoline's or
 * tracepoint's context. A program serving every tracepoint (shared set,
 * raw_tp_capture) takes the slot and capture counts from the plan, not
 * from the constants the loader splices into a copy. */
static __always_inline void one_entry(void *ctx, __u32 func, int kprobe, int shared)
{
	__u32 d;
	struct shadow *s;
	const struct plan *p;
	struct call *c;
	/* A kprobe's stack position is its stack pointer, a trampoline's or
	 * a tracepoint's its context, from which --track reads the slots
	 * (CTX_ONE). */
	__u64 sp = kprobe ? ctx_u64(ctx, REG_SP) : (__u64)ctx;

	p = bpf_map_lookup_elem(&plans, &func);
	if (!p || !(c = push(ctx, &s, &d, func, p, sp, kprobe ? KPROBE_ONE : CTX_ONE)))
		return;
	c->ip = func;
	if (kprobe)
		kprobe_slots(ctx, c->slots, p);
	else
		ctx_slots(ctx, shared ? p->nr_slots : trawl_nr_slots(), c->slots);
	enter(ctx, c, d, p, shared ? KPROBE_MANY : KPROBE_ONE);
}

SEC("kprobe/trawl_placeholder")
int kprobe_one(void *ctx)
{
	one_entry(ctx, trawl_func(), 1, 0);
	return 0;
}

SEC("fentry/trawl_placeholder")
int fentry_one(void *ctx)
{
	one_entry(ctx, trawl_func(), 0, 0);
	return 0;
}

SEC("fexit/trawl_placeholder")
int fexit_one(void *ctx)
{
	one_exit(ctx, trawl_func(), ctx_ret(ctx, trawl_nr_slots()));
	return 0;
}

/* A tracepoint's program: its context is the tracepoint's arguments, a
 * slot each, as a trampoline's. An event is a call entered and ended at
 * once, returning nothing: it goes the way of every call, filters,
 * captures and --stats included. Before 6.10, the loader loads a copy of
 * tp_btf_one per tracepoint, which knows its plan index and slot count as
 * constants. */
SEC("tp_btf/trawl_placeholder")
int tp_btf_one(void *ctx)
{
	__u32 func = trawl_func();

	one_entry(ctx, func, 0, 0);
	one_exit(ctx, func, 0);
	return 0;
}

/* From 6.10, raw_tp_capture is loaded once and attached to every
 * tracepoint with the tracepoint's plan index as the attach cookie. It
 * reads the arguments with bpf_probe_read_kernel (ctx_slots), never by a
 * load from ctx: the kernel refuses to attach a raw_tp program to a
 * tracepoint with fewer arguments than its furthest load from ctx
 * reaches. */
SEC("raw_tp/trawl_placeholder")
int raw_tp_capture(void *ctx)
{
	__u32 func = bpf_get_attach_cookie(ctx);

	one_entry(ctx, func, 0, 1);
	one_exit(ctx, func, 0);
	return 0;
}

#endif
