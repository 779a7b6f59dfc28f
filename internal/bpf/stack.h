/* SPDX-License-Identifier: GPL-2.0 */
/* Kernel stacks (--stack), part of capture.c (stack.go). */
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

#endif
