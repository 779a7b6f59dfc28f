/* SPDX-License-Identifier: GPL-2.0 */
/* Arguments, part of capture.c: where each kind of program finds a call's
 * argument slots, as its plan says (internal/plan). */
#ifndef TRAWL_ARGS_H
#define TRAWL_ARGS_H

/* trampoline_slots reads the argument slots a trampoline saved (5.17). */
static __always_inline void trampoline_slots(void *ctx, __u64 *slots, const struct plan *p)
{
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (i >= p->nr_slots)
			break;
		bpf_get_func_arg(ctx, i, &slots[i]);
	}
}

/* kprobe_moved_slots reads the slots of a plan whose slots are not the
 * argument registers in order: from the registers, or from the stack for
 * arguments the ABI puts there. Not inlined, so that the common case does
 * not pay for its registers. */
static __noinline void kprobe_moved_slots(void *ctx, __u64 *slots, const struct plan *p)
{
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (i >= p->nr_slots)
			break;
		__u16 src = p->src[i];
		if (src & SRC_STACK)
			bpf_probe_read_kernel(&slots[i], 8, (void *)(ctx_u64(ctx, REG_SP) + (src & ~SRC_STACK)));
		else
			slots[i] = arg_reg(ctx, src);
	}
}

/* kprobe_slots reads the argument slots: all argument registers at once
 * when the slots are those registers in order, as most often. */
static __always_inline void kprobe_slots(void *ctx, __u64 *slots, const struct plan *p)
{
	if (p->flags & PLAN_REGS_IN_ORDER)
		copy_arg_regs(ctx, slots);
	else
		kprobe_moved_slots(ctx, slots, p);
}

#endif
