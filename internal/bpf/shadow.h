/* SPDX-License-Identifier: GPL-2.0 */
/* Calls in flight, part of capture.c: a task's shadow stack, which an
 * entry pushes and its exit pops, and the frames of calls that copy
 * memory. */
#ifndef TRAWL_SHADOW_H
#define TRAWL_SHADOW_H

/* slot_of masks a depth already checked against MAX_DEPTH: the compiler
 * drops the mask as redundant, and some verifiers lose the check's bound. */
static __always_inline __u32 slot_of(__u32 d)
{
	asm volatile("" : "+r"(d));
	return d & (MAX_DEPTH - 1);
}

/* push starts a call of func, planned by p, at stack position pos (see
 * stale_gate), on the task's shadow stack and returns it, with its depth
 * in *dp, or 0 when the call is not traced (filtered, no storage or too
 * deep). *sp is set once the shadow's depth counts the call. ctx is the
 * program's: a kprobe's if kprobe is KPROBE_MANY or KPROBE_ONE, one whose
 * slots it holds if CTX_ONE, a trampoline's if 0. */
static __always_inline struct call *push(void *ctx, struct shadow **sp, __u32 *dp, __u32 func, const struct plan *p, __u64 pos, int kprobe)
{
	struct shadow *s;
	struct call *c;
	__u32 d;
	int unwanted = 0;

	if (armed != ARM_ON || outside_entry(p))
		return 0;
	if (!wanted()) {
		/* --track: a call of a tracked object passes every filter. */
		if (!track_on || !track_seen(ctx, p, kprobe)) {
			count(CNT_FILTERED);
			return 0;
		}
		unwanted = CALL_UNWANTED;
	}
	s = get_shadow(1);
	if (!s) {
		count(CNT_MISS_STORAGE);
		return 0;
	}
	*sp = s;
	if (entry_gate && p->flags & PLAN_ENTRY && s->entry_at)
		stale_gate(s, func, pos);
	d = s->depth++;
	if (d >= MAX_DEPTH) {
		count(CNT_MISS_DEPTH);
		return 0;
	}
	*dp = d;
	c = &s->calls[slot_of(d)];
	c->func = func;
	if (!kprobe)
		c->ip = pos;
	c->flags = 0;
	open_gate(s, c, d, p, pos);
	c->flags |= unwanted;
	c->nr_slots = p->nr_slots;
	c->entry_ts = bpf_ktime_get_ns();
	return c;
}

/* new_frame returns the frame of call c at depth d, to fill with its
 * slots and captures: the frames map's entry for the task and depth,
 * made from the per-CPU scratch frame the first time the task gets there.
 * Without one, the exit finds no frame of c's (frame_of counts the miss)
 * and sends the call without its captures, flagged truncated. */
static __always_inline struct frame *new_frame(struct call *c, __u32 d)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct frame_key key = {.tid = id, .depth = d};
	struct frame *f = bpf_map_lookup_elem(&frames, &key);
	struct scratch *sc;

	c->flags |= CALL_FRAMED;
	if (!f && (sc = get_scratch())) {
		bpf_map_update_elem(&frames, &key, &sc->frame, BPF_ANY);
		f = bpf_map_lookup_elem(&frames, &key);
	}
	if (!f)
		return 0;
	f->rec.entry_ts = c->entry_ts;
	f->rec.func = c->func;
	f->rec.flags = REC_ENTRY;
	f->rec.depth = d;
	f->rec.cap_failed = 0;
	return f;
}

/* frame_of returns the frame of call c at depth d, or 0 when the frames
 * map lost it (evicted, or reused by a later call). */
static __always_inline struct frame *frame_of(struct call *c, __u32 d)
{
	struct frame_key key = {.tid = bpf_get_current_pid_tgid(), .depth = d};
	struct frame *f = bpf_map_lookup_elem(&frames, &key);

	if (!f || f->rec.entry_ts != c->entry_ts) {
		count(CNT_MISS_FRAME);
		return 0;
	}
	return f;
}

/* is_call says whether c is the call that returns, known by key as
 * call.ip is. */
static __always_inline int is_call(struct call *c, __u64 key)
{
	return c->ip == key;
}

/* leave takes the calls from depth d up off the task's shadow s, once
 * the call at d is sent. An exit lowers the depth only then: until then
 * a program an interrupt runs on this task pushes its call above the
 * exiting one, not over its call and its frame, from which the exiting
 * call's record is being copied. */
static __always_inline void leave(struct shadow *s, __u32 d)
{
	s->depth = d;
	shut_gate(s);
}

/* pop finds the call that returns, the innermost call keyed key (as
 * call.ip), and returns it with its depth in *dp and the task's shadow in
 * *sp, for leave once it is sent. Calls above it are calls whose exit was
 * missed. Without one, the entry was missed or not traced. */
static __always_inline struct call *pop(__u64 key, __u32 *dp, struct shadow **sp)
{
	struct shadow *s = get_shadow(0);
	struct call *c;
	__u32 d;

	*sp = s;
	if (!s || !s->depth)
		return 0;
	d = s->depth;
	if (d > MAX_DEPTH) {
		/* This call or an inner one was too deep. */
		s->depth--;
		return 0;
	}
	/* Most often the call on top: try it before the search. */
	c = &s->calls[slot_of(d - 1)];
	if (is_call(c, key)) {
		*dp = d - 1;
		return c;
	}
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (d == 0)
			break;
		d--;
		c = &s->calls[slot_of(d)];
		if (is_call(c, key)) {
			count(CNT_MISS_EXIT);
			*dp = d;
			return c;
		}
	}
	return 0;
}

#endif
