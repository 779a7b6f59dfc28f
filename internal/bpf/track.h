/* SPDX-License-Identifier: GPL-2.0 */
/* --track, part of capture.c: objects of one type followed through the
 * kernel (track.go). */
#ifndef TRAWL_TRACK_H
#define TRAWL_TRACK_H

/* --track: follow objects of one pointer type through the kernel. A call
 * that passes every filter starts a journey: the pointers of the tracked
 * type it received (the slots its plan's track_slots marks) go into the
 * tracks map, with the journey's id, the address of the first. From then
 * on a call receiving a tracked pointer is traced whatever the filters
 * say, and a call receiving none is left out (counted). A function that
 * receives a tracked object and returns a pointer of the type
 * (PLAN_TRACK_RET: clones, copies) adds the pointer it returns to the
 * journey; a free function (PLAN_TRACK_FREE) ends the tracking of the
 * objects it received, at its exit, so that the calls it makes on them
 * are still in the journey. A freed object stays in the tracks map,
 * marked freed (seen 0), so that the exits of free functions around the
 * one that freed it still find its journey; the next entry that
 * receives its address, a new object, removes it. An object no traced
 * call received for track_timeout ns stops being tracked too. The
 * journeys map counts each journey's objects still tracked: the call
 * that frees the last one is flagged REC_TRACK_END. Both maps are LRU:
 * an object evicted from the full tracks map is counted by the loader
 * (tracked - freed - expired - still tracked unfreed), a journey evicted
 * from the journeys map never ends.
 *
 * A journey starts at the entry of its first call, so that the calls it
 * makes are in it, unless a filter decides at exit (--min-duration,
 * --errors, a --filter using ret): it then starts at that call's exit. */
#define track_at_exit (min_duration || filter_errors || filter_at == FILTER_AT_EXIT)

/* Set by the loader. */
FEATURE(__u32 track_on) = 0;      /* --track: see track_entry */
FEATURE(__u64 track_timeout) = 0; /* --track: ns an object stays tracked unseen; 0: no limit */

/* What finish tells emit and send of a call's journey. */
#define TK_TRACKED 1 /* the call received a tracked object: no filter applies */
#define TK_END 2     /* it freed its journey's last object */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, __u64);
	__type(value, struct tracked);
} tracks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, __u64);
	__type(value, __u64);
} journeys SEC(".maps");

/* track_slot returns slot i of call c: from the trampoline's ctx, or
 * from c for kprobes. */
static __always_inline __u64 track_slot(void *ctx, struct call *c, int i, int kprobe)
{
	__u64 v = 0;

	/* Bounded by the check, not by a mask: MAX_SLOTS is no power of 2. */
	if (kprobe)
		return i >= 0 && i < MAX_SLOTS ? c->slots[i] : 0;
	bpf_get_func_arg(ctx, i, &v);
	return v;
}

/* journey_put counts one object of journey j less, and says whether it
 * was the last. The count is read after the decrement, not fetched by it:
 * 5.10 refuses a whole program holding an atomic fetch (5.12), even
 * where it is never run. Two CPUs may both read 0; the delete, which
 * only one of them wins, decides. */
static __always_inline int journey_put(__u64 j)
{
	__u64 *n = bpf_map_lookup_elem(&journeys, &j);

	if (!n)
		return 0;
	__sync_fetch_and_add(n, -1);
	if (*(volatile __u64 *)n != 0)
		return 0;
	return bpf_map_delete_elem(&journeys, &j) == 0;
}

/* track_add tracks object v in journey j, from now, unless it is
 * tracked already. */
static __always_inline void track_add(__u64 v, __u64 j, __u64 now)
{
	struct tracked t = {.journey = j, .seen = now}, *old;
	__u64 *n;

	old = bpf_map_lookup_elem(&tracks, &v);
	if (old && old->seen)
		return; /* tracked already */
	/* New, or at the address of a freed one. */
	if (bpf_map_update_elem(&tracks, &v, &t, BPF_ANY))
		return;
	count(CNT_TRACKED);
	n = bpf_map_lookup_elem(&journeys, &j);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* track_lookup returns the journey of the first tracked object call c
 * of plan p received, or 0, and notes the time now on it. At entry
 * (expire set), an object not seen for track_timeout ns is untracked
 * instead, and a freed one is forgotten; at exit, a freed one counts. */
static __always_inline __u64 track_lookup(void *ctx, struct call *c, const struct plan *p, int kprobe, __u64 now, int expire)
{
	struct tracked *t;
	__u64 v, j;

	for (int i = 0; i < MAX_SLOTS; i++) {
		if (!(p->track_slots >> i & 1))
			continue;
		v = track_slot(ctx, c, i, kprobe);
		if (!v || !(t = bpf_map_lookup_elem(&tracks, &v)))
			continue;
		j = t->journey;
		if (!t->seen) {
			if (!expire)
				return j;
			bpf_map_delete_elem(&tracks, &v);
			continue;
		}
		if (expire && track_timeout && now - t->seen > track_timeout) {
			if (!bpf_map_delete_elem(&tracks, &v)) {
				count(CNT_TRACK_EXPIRED);
				journey_put(j);
			}
			continue;
		}
		t->seen = now;
		return j;
	}
	return 0;
}

/* The kprobe argument of push for the programs serving one function or
 * tracepoint whose slots are their context's (fentry_one, tp_btf_one):
 * track_seen copies them from there, as tp_btf has no bpf_get_func_arg. */
#define CTX_ONE 3

/* track_seen says whether a call of plan p, whose task filters refused
 * it, receives a tracked object, before it is pushed: read from the
 * program's ctx, so that the calls of other tasks that receive none,
 * most of them, cost no task storage. */
static __always_inline int track_seen(void *ctx, const struct plan *p, int kprobe)
{
	struct tracked *t;
	__u64 v = 0;
	__u16 src;

	for (int i = 0; i < MAX_SLOTS; i++) {
		if (!(p->track_slots >> i & 1))
			continue;
		if (kprobe == CTX_ONE) {
			bpf_probe_read_kernel(&v, 8, (char *)ctx + 8 * i);
		} else if (!kprobe) {
			bpf_get_func_arg(ctx, i, &v);
		} else {
			src = p->src[i];
			if (src & SRC_STACK)
				bpf_probe_read_kernel(&v, 8, (void *)(ctx_u64(ctx, REG_SP) + (src & ~SRC_STACK)));
			else
				v = arg_reg(ctx, src);
		}
		if (v && (t = bpf_map_lookup_elem(&tracks, &v)) && t->seen)
			return 1;
	}
	return 0;
}

/* is_object says whether a returned pointer is an object: not NULL, not
 * an ERR_PTR. */
static __always_inline int is_object(__u64 ret)
{
	return ret && ret < (__u64)-MAX_ERRNO;
}

/* track_begin starts a journey with the objects call c of plan p
 * received (and, at exit, the one it returned), and returns its id, 0
 * when it received none. */
static __always_inline __u64 track_begin(void *ctx, struct call *c, const struct plan *p, int kprobe, __u64 ret, int exit)
{
	__u64 now = bpf_ktime_get_ns(), zero = 0, j = 0, v;

	for (int i = 0; i < MAX_SLOTS; i++) {
		if (!(p->track_slots >> i & 1))
			continue;
		v = track_slot(ctx, c, i, kprobe);
		if (!v)
			continue;
		if (!j) {
			j = v;
			bpf_map_update_elem(&journeys, &j, &zero, BPF_ANY);
			count(CNT_JOURNEYS);
		}
		track_add(v, j, now);
	}
	if (j && exit && p->flags & PLAN_TRACK_RET && is_object(ret))
		track_add(ret, j, now);
	return j;
}

/* track_entry decides at entry on call c of plan p, whose task filters
 * refused it if it is CALL_UNWANTED: a call receiving a tracked object
 * is CALL_TRACKED, its journey in *j. It returns 0 for a call left out. */
static __always_inline int track_entry(void *ctx, struct call *c, const struct plan *p, int kprobe, __u64 *j)
{
	*j = track_lookup(ctx, c, p, kprobe, c->entry_ts, 1);
	if (*j) {
		c->flags |= CALL_TRACKED;
		return 1;
	}
	if (c->flags & CALL_UNWANTED) {
		c->flags |= CALL_DROP;
		count(CNT_FILTERED);
		return 0;
	}
	return 1;
}

/* track_start starts a journey at the entry of call c, which passed the
 * filters, unless a filter decides at its exit. A call receiving no
 * object of the type is left out, as is a call of a free or drop
 * function: a journey never starts with its end. */
static __always_inline void track_start(void *ctx, struct call *c, const struct plan *p, int kprobe)
{
	int free = p->flags & (PLAN_TRACK_FREE | PLAN_TRACK_DROP);

	if (c->flags & CALL_TRACKED || (track_at_exit && !free))
		return;
	if (!free && track_begin(ctx, c, p, kprobe, 0, 0)) {
		c->flags |= CALL_TRACKED | CALL_TRACK_START;
		return;
	}
	c->flags |= CALL_DROP;
	count(CNT_UNTRACKED);
}

/* track_end_outer gives the end of a journey, which the call at depth d
 * ended, to the outermost tracked call in progress around it on the
 * task (CALL_TRACK_END), whose exit is sent last: a free is often made
 * inside other calls that receive the object (__kfree_skb around
 * kfree_skbmem). It returns whether the call at d ends it itself. */
static __always_inline int track_end_outer(__u32 d)
{
	struct shadow *s = get_shadow(0);

	if (!s)
		return 1;
	for (int k = 0; k < MAX_DEPTH; k++) {
		if (k >= d)
			break;
		if (s->calls[k].flags & CALL_TRACKED) {
			s->calls[k].flags |= CALL_TRACK_END;
			return 0;
		}
	}
	return 1;
}

/* track_exit returns the journey of call c at depth d, which returns
 * ret, with its TK_* flags in *tk. A tracked call's journey is known
 * from its entry: the one it started (its first object), or the one its
 * frame holds, fj (0 when it has none: then found again by its objects).
 * It frees the objects of the journey it received, or adds the pointer
 * it returns to the journey. For another call, it is the journey it
 * would start if it passes the exit filters. */
static __always_inline __u64 track_exit(void *ctx, struct call *c, __u32 d, __u64 ret, int kprobe, int *tk, __u64 fj)
{
	const struct plan *p = bpf_map_lookup_elem(&plans, &c->func);
	__u64 now = bpf_ktime_get_ns(), first = 0, j, v;
	struct tracked *t;

	*tk = 0;
	if (!p)
		return 0;
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (p->track_slots >> i & 1 && (first = track_slot(ctx, c, i, kprobe)))
			break;
	}
	if (!(c->flags & CALL_TRACKED))
		return p->flags & (PLAN_TRACK_FREE | PLAN_TRACK_DROP) ? 0 : first;
	*tk = TK_TRACKED;
	if (c->flags & CALL_TRACK_END)
		*tk |= TK_END;
	j = c->flags & CALL_TRACK_START ? first : fj;
	if (!(p->flags & PLAN_TRACK_FREE)) {
		if (!j)
			j = track_lookup(ctx, c, p, kprobe, now, 0);
		if (j && p->flags & PLAN_TRACK_RET && is_object(ret))
			track_add(ret, j, now);
		return j;
	}
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (!(p->track_slots >> i & 1))
			continue;
		v = track_slot(ctx, c, i, kprobe);
		if (!v || !(t = bpf_map_lookup_elem(&tracks, &v)))
			continue;
		if (!j)
			j = t->journey;
		/* Freed already by a call inside, or of another journey:
		 * a new object at a freed one's address. */
		if (!t->seen || t->journey != j)
			continue;
		t->seen = 0;
		count(CNT_TRACK_FREED);
		if (journey_put(j) && track_end_outer(d))
			*tk |= TK_END;
	}
	return j;
}

/* track_after starts the journey of call c, which passed the exit
 * filters and was sent, when the filters decided at its exit. */
static __always_inline void track_after(void *ctx, struct call *c, __u64 ret, int kprobe)
{
	const struct plan *p;

	if (!(c->flags & CALL_TRACKED) && (p = bpf_map_lookup_elem(&plans, &c->func)) && !(p->flags & (PLAN_TRACK_FREE | PLAN_TRACK_DROP)))
		track_begin(ctx, c, p, kprobe, ret, 1);
}

/* track_passes says whether a call of journey track (0: none), with
 * TK_* flags tk, is sent as far as --track goes: with it on, only calls
 * of a journey, and tracked calls whose object was evicted meanwhile. */
static __always_inline int track_passes(__u64 track, int tk)
{
	if (!track_on || track || tk & TK_TRACKED)
		return 1;
	count(CNT_FILTERED_EXIT);
	return 0;
}

#endif
