/* SPDX-License-Identifier: GPL-2.0 */
/* What trawl's BPF programs know of the kernel beyond BTF relocations:
 * the registers a kprobe sees, and the task fields they read. */
#ifndef TRAWL_KERNEL_H
#define TRAWL_KERNEL_H

struct task_struct {
	int pid;
	int tgid;
	char comm[16];
} __attribute__((preserve_access_index));

/* read_comm copies task t's name with plain loads through BTF:
 * bpf_get_current_comm() copies with strscpy, and costs more than the rest
 * of a call's record. A name changing meanwhile may come out torn, as it
 * may from /proc. */
static __always_inline void read_comm(struct task_struct *t, __u64 name[2])
{
	name[0] = *(__u64 *)&t->comm[0];
	name[1] = *(__u64 *)&t->comm[8];
}

/* Kprobe programs read registers from their struct pt_regs *ctx, whose
 * start the ABI fixes: the ptrace layout on x86-64, user_pt_regs on arm64
 * (as libbpf's bpf_tracing.h assumes). ctx_u64 loads the 8 bytes at a
 * constant offset; the inline asm keeps clang from merging a switch of
 * such loads into one load at a variable offset, which the verifier
 * refuses for ctx. A plan names argument registers by index. */
#define ctx_u64(ctx, off) ({ __u64 __v; asm volatile("%0 = *(u64 *)(%1 + %2)" : "=r"(__v) : "r"(ctx), "i"(off)); __v; })

#if defined(__TARGET_ARCH_x86)
#define REG_SP 152 /* sp */
#define REG_RET 80 /* ax */

/* arg_reg reads argument register i: di, si, dx, cx, r8, r9. */
static __always_inline __u64 arg_reg(void *ctx, __u32 i)
{
	switch (i) {
	case 0: return ctx_u64(ctx, 112);
	case 1: return ctx_u64(ctx, 104);
	case 2: return ctx_u64(ctx, 96);
	case 3: return ctx_u64(ctx, 88);
	case 4: return ctx_u64(ctx, 72);
	case 5: return ctx_u64(ctx, 64);
	}
	return 0;
}

/* copy_arg_regs copies every argument register into slots[0...5]: one
 * load and one store each, where arg_reg(ctx, i) in a loop goes through
 * the switch. */
static __always_inline void copy_arg_regs(void *ctx, __u64 *slots)
{
	slots[0] = ctx_u64(ctx, 112);
	slots[1] = ctx_u64(ctx, 104);
	slots[2] = ctx_u64(ctx, 96);
	slots[3] = ctx_u64(ctx, 88);
	slots[4] = ctx_u64(ctx, 72);
	slots[5] = ctx_u64(ctx, 64);
}
#elif defined(__TARGET_ARCH_arm64)
#define REG_SP 248 /* sp, after regs[31] */
#define REG_RET 0  /* x0 */

/* arg_reg reads argument register i: x0-x7. */
static __always_inline __u64 arg_reg(void *ctx, __u32 i)
{
	switch (i) {
	case 0: return ctx_u64(ctx, 0);
	case 1: return ctx_u64(ctx, 8);
	case 2: return ctx_u64(ctx, 16);
	case 3: return ctx_u64(ctx, 24);
	case 4: return ctx_u64(ctx, 32);
	case 5: return ctx_u64(ctx, 40);
	case 6: return ctx_u64(ctx, 48);
	case 7: return ctx_u64(ctx, 56);
	}
	return 0;
}

/* copy_arg_regs copies every argument register into slots[0...7]. */
static __always_inline void copy_arg_regs(void *ctx, __u64 *slots)
{
	slots[0] = ctx_u64(ctx, 0);
	slots[1] = ctx_u64(ctx, 8);
	slots[2] = ctx_u64(ctx, 16);
	slots[3] = ctx_u64(ctx, 24);
	slots[4] = ctx_u64(ctx, 32);
	slots[5] = ctx_u64(ctx, 40);
	slots[6] = ctx_u64(ctx, 48);
	slots[7] = ctx_u64(ctx, 56);
}
#else
#error "trawl's kprobe programs know the registers of x86-64 and arm64 only"
#endif

#endif
