/* SPDX-License-Identifier: GPL-2.0 */
/* What trawl's BPF programs know of the kernel beyond BTF relocations:
 * the registers a kprobe sees, and the task fields they read; and the
 * arithmetic both capture.c and floor.c need. */
#ifndef TRAWL_KERNEL_H
#define TRAWL_KERNEL_H

struct signal_struct {
	struct {
		int counter;
	} live; /* atomic_t: threads of the group not yet exiting */
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	char comm[16];
	struct signal_struct *signal;
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

/* log2_floor returns floor(log2(v)), 0 for v 0 or 1: BPF has no
 * count-leading-zeros. */
static __always_inline __u32 log2_floor(__u64 v)
{
	__u32 e = 0;

	if (v >> 32) {
		v >>= 32;
		e += 32;
	}
	if (v >> 16) {
		v >>= 16;
		e += 16;
	}
	if (v >> 8) {
		v >>= 8;
		e += 8;
	}
	if (v >> 4) {
		v >>= 4;
		e += 4;
	}
	if (v >> 2) {
		v >>= 2;
		e += 2;
	}
	if (v >> 1)
		e += 1;
	return e;
}

/* Kprobe programs read registers from their struct pt_regs *ctx, whose
 * start the ABI fixes: the ptrace layout on x86-64, user_pt_regs on arm64
 * (as libbpf's bpf_tracing.h assumes). ctx_u64 loads the 8 bytes at a
 * constant offset; the inline asm keeps clang from merging a switch of
 * such loads into one load at a variable offset, which the verifier
 * refuses for ctx. A plan names argument registers by index. */
#define ctx_u64(ctx, off) ({ __u64 __v; asm volatile("%0 = *(u64 *)(%1 + %2)" : "=r"(__v) : "r"(ctx), "i"(off)); __v; })

/* ARG_REGS(X) calls X(index, offset in ctx) for each argument register. */
#if defined(__TARGET_ARCH_x86)
#define REG_SP 152 /* sp */
#define REG_RET 80 /* ax */
/* di, si, dx, cx, r8, r9 */
#define ARG_REGS(X) X(0, 112) X(1, 104) X(2, 96) X(3, 88) X(4, 72) X(5, 64)
#elif defined(__TARGET_ARCH_arm64)
#define REG_SP 248 /* sp, after regs[31] */
#define REG_RET 0  /* x0 */
/* x0-x7 */
#define ARG_REGS(X) X(0, 0) X(1, 8) X(2, 16) X(3, 24) X(4, 32) X(5, 40) X(6, 48) X(7, 56)
#else
#error "trawl's kprobe programs know the registers of x86-64 and arm64 only"
#endif

/* arg_reg reads argument register i. */
static __always_inline __u64 arg_reg(void *ctx, __u32 i)
{
#define ARG_REG_CASE(i, off) case i: return ctx_u64(ctx, off);
	switch (i) {
	ARG_REGS(ARG_REG_CASE)
	}
	return 0;
#undef ARG_REG_CASE
}

/* copy_arg_regs copies every argument register i into slots[i]: one load
 * and one store each, where arg_reg(ctx, i) in a loop goes through the
 * switch. */
static __always_inline void copy_arg_regs(void *ctx, __u64 *slots)
{
#define COPY_ARG_REG(i, off) slots[i] = ctx_u64(ctx, off);
	ARG_REGS(COPY_ARG_REG)
#undef COPY_ARG_REG
}

#endif
