/* SPDX-License-Identifier: GPL-2.0 */
/* Kernel and user stacks (--stack), part of capture.c (stack.go). */
#ifndef TRAWL_STACK_H
#define TRAWL_STACK_H

/* Kernel stacks (--stack). Each traced call's entry takes its kernel
 * stack into the stacks map, which keeps each distinct stack once, by its
 * hash; the call carries the id. A stack whose hash bucket holds another
 * stack, or that the map has no room for, is counted as missed. */
FEATURE(__u32 want_stack) = 0;

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, __u32);
	__uint(value_size, MAX_STACK * sizeof(__u64));
} stacks SEC(".maps");

/* take_stack notes the kernel stack of call c, at its entry. */
static __always_inline void take_stack(void *ctx, struct call *c)
{
	long id;

	c->stack = 0;
	if (!want_stack)
		return;
	id = bpf_get_stackid(ctx, &stacks, 0);
	if (id < 0 || id >= MAX_STACKS) {
		count(CNT_MISS_STACK);
		return;
	}
	c->stack = id + 1;
}

/* User stacks (--stack user). The user stack of the task that makes a
 * traced call is taken when the call is sent, into the ustacks map as
 * kernel stacks are: the task's user registers stay as they were at the
 * call's entry until it returns to user space, but for a call that execs
 * a new program, which shows the new program's first frame. A call in a
 * kernel thread has no user stack; one the map has no room for, or whose
 * hash bucket holds another stack, is counted as missed. The frames are
 * found by frame pointers. */
FEATURE(__u32 want_ustack) = 0;

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, __u32);
	__uint(value_size, MAX_STACK * sizeof(__u64));
} ustacks SEC(".maps");

#define TRAWL_EFAULT 14

/* take_ustack returns the id + 1 of the current task's user stack, 0 for
 * none, or STACK_LOST when the map could not take it. */
static __always_inline __u32 take_ustack(void *ctx)
{
	long id;

	if (!want_ustack)
		return 0;
	id = bpf_get_stackid(ctx, &ustacks, BPF_F_USER_STACK);
	if (id == -TRAWL_EFAULT)
		return 0; /* no user stack: a kernel thread */
	if (id < 0 || id >= MAX_STACKS) {
		count(CNT_MISS_USTACK);
		return STACK_LOST;
	}
	return id + 1;
}

/* ustack returns the id + 1 of the current task's user stack, or 0. */
static __always_inline __u32 ustack(void *ctx)
{
	__u32 id = take_ustack(ctx);

	return id == STACK_LOST ? 0 : id;
}

/* Stack counts (--stats with --stack). An aggregating trace that takes
 * stacks counts each function's calls in stack_counts by kernel stack,
 * user stack and, with a user stack, process, for user space to read at
 * the end: flame graphs counted in the kernel, exact at any call rate. A
 * stack that its stack map could not take (counted as missed) counts as
 * STACK_LOST, as does the kernel stack of an exit without its entry. A
 * call that stack_counts has no room for is counted in its function's
 * figures (func_stats.unstacked) and in CNT_MISS_STACK_COUNT. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, struct stack_count_key);
	__type(value, __u64);
} stack_counts SEC(".maps");

/* count_stack counts a call of func whose kernel stack is stack (as in
 * struct call) under its stacks, at its exit. */
static __always_inline void count_stack(void *ctx, __u32 func, __u32 stack)
{
	struct stack_count_key k = {.func = func};
	struct func_stats *st;
	__u64 one = 1, *n;

	if (!want_stack && !want_ustack)
		return;
	if (want_stack)
		k.stack = stack ? stack : STACK_LOST;
	k.ustack = take_ustack(ctx);
	if (k.ustack)
		k.pid = current_tgid();
	n = bpf_map_lookup_elem(&stack_counts, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	if (!bpf_map_update_elem(&stack_counts, &k, &one, BPF_NOEXIST))
		return;
	/* Another CPU may have added it meanwhile. */
	n = bpf_map_lookup_elem(&stack_counts, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	count(CNT_MISS_STACK_COUNT);
	st = figures_of(func);
	if (st)
		__sync_fetch_and_add(&st->unstacked, 1);
}

#endif
