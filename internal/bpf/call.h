/* SPDX-License-Identifier: GPL-2.0 */
/* A traced call's way, part of capture.c, shared by every program: enter
 * at its entry, finish at its exit, which sends it through emit (framed)
 * or send. */
#ifndef TRAWL_CALL_H
#define TRAWL_CALL_H

/* emit sends a call from its frame, or an exit without its entry from the
 * scratch frame, if it passes the exit filters (a call of a tracked
 * object, tk set, passes them all). It returns whether it sent the call.
 * track is its journey, see track_exit. */
static __always_inline int emit(void *ctx, struct frame *f, __u64 ret, __u64 track, int tk)
{
	int entry = f->rec.flags & REC_ENTRY;
	__u32 len;

	f->rec.exit_ts = bpf_ktime_get_ns();
	f->rec.ret = ret;
	f->rec.flags |= REC_EXIT;
	f->rec.cpu = bpf_get_smp_processor_id();
	count(CNT_CALLS);
	if (!(tk & TK_TRACKED)) {
		if (!exit_passes(f->rec.func, entry ? f->rec.exit_ts - f->rec.entry_ts : 0, ret))
			return 0;
		if (filter_at && (!entry || (filter_at == FILTER_AT_EXIT && !trawl_filter(&f->rec)))) {
			count(CNT_FILTERED_EXIT);
			return 0;
		}
	}
	if (!track_passes(track, tk))
		return 0;
	if (aggregate) {
		tally(f->rec.func, entry, f->rec.exit_ts - f->rec.entry_ts, ret);
		count_stack(ctx, f->rec.func, f->rec.stack);
		return 0;
	}
	if (entry)
		capture_exit(f, ret);
	if (entry && show_on)
		trawl_show(f);
	who(&f->rec);
	f->rec.ustack = ustack(ctx);
	f->rec.track = track;
	if (tk & TK_END)
		f->rec.flags |= REC_TRACK_END;
	len = f->rec.data_len;
	if (len > MAX_DATA)
		len = MAX_DATA;
	if (bpf_ringbuf_output(&events, f, sizeof(f->rec) + len, 0)) {
		count(CNT_DROPS);
		return 0;
	}
	return 1;
}

/* send sends call c at depth d straight into the ring buffer, with its
 * slots from the trampoline's ctx, or from c for kprobes. A framed call
 * whose frame was lost goes this way too, without its captures. It
 * returns whether it sent the call; track and tk as for emit. */
static __always_inline int send(void *ctx, struct call *c, __u32 d, __u64 ret, int kprobe, __u64 track, int tk)
{
	__u64 now = bpf_ktime_get_ns();
	struct record *r;
	__u32 us;

	count(CNT_CALLS);
	if (!(tk & TK_TRACKED)) {
		if (!exit_passes(c->func, now - c->entry_ts, ret))
			return 0;
		if (filter_at) {
			/* A filter expression with no frame to read. */
			count(CNT_FILTERED_EXIT);
			return 0;
		}
	}
	if (!track_passes(track, tk))
		return 0;
	if (aggregate) {
		tally(c->func, 1, now - c->entry_ts, ret);
		count_stack(ctx, c->func, c->stack);
		return 0;
	}
	us = ustack(ctx);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count(CNT_DROPS);
		return 0;
	}
	r->entry_ts = c->entry_ts;
	r->exit_ts = now;
	r->ret = ret;
	for (int i = 0; i < MAX_SLOTS; i++) {
		__u64 v = 0;

		if (i >= c->nr_slots)
			break;
		if (kprobe)
			v = c->slots[i];
		else
			bpf_get_func_arg(ctx, i, &v);
		r->slots[i] = v;
	}
	r->func = c->func;
	r->cpu = bpf_get_smp_processor_id();
	r->flags = REC_ENTRY | REC_EXIT | (c->flags & CALL_FRAMED ? REC_TRUNCATED : 0);
	r->depth = d;
	who(r);
	__builtin_memset(r->cap_len, 0, sizeof(r->cap_len));
	r->cap_failed = 0;
	r->data_len = 0;
	r->chain = 0;
	r->stack = c->stack;
	r->ustack = us;
	r->track = track;
	if (tk & TK_END)
		r->flags |= REC_TRACK_END;
	bpf_ringbuf_submit(r, 0);
	return 1;
}

/* exit_only sends an exit whose entry was missed. */
static __always_inline void exit_only(void *ctx, __u32 func, __u64 ret)
{
	struct scratch *s;

	if (entry_gate && !in_entry())
		return;
	if (!wanted())
		return;
	if (armed != ARM_ON)
		return;
	count(CNT_MISS_ENTRY);
	if (error_chains || track_on)
		return; /* no chain holds a call without its entry, nor journey */
	s = get_scratch();
	if (!s)
		return;
	__builtin_memset(&s->frame.rec, 0, sizeof(s->frame.rec));
	s->frame.rec.func = func;
	emit(ctx, &s->frame, ret, 0, 0);
}

/* finish sends call c at depth d, which returned ret. */
static __always_inline void finish(void *ctx, struct call *c, __u32 d, __u64 ret, int kprobe)
{
	struct frame *f = 0;
	__u64 track = 0;
	int tk = 0, sent;

	if (c->flags & CALL_DROP)
		return; /* counted at entry */
	if (error_chains) {
		chain_exit(ctx, c, d, ret, kprobe);
		return;
	}
	if (c->flags & CALL_FRAMED)
		f = frame_of(c, d);
	if (track_on)
		track = track_exit(ctx, c, d, ret, kprobe, &tk, f ? f->rec.track : 0);
	if (f)
		sent = emit(ctx, f, ret, track, tk);
	else
		sent = send(ctx, c, d, ret, kprobe, track, tk);
	if (track_on && sent)
		track_after(ctx, c, ret, kprobe);
}

/* finish_exit sends the call that returns, or an exit without its entry. */
static __always_inline void finish_exit(void *ctx, __u64 ret, int kprobe)
{
	struct shadow *s;
	__u64 key;
	__u32 d = 0;
	struct call *c;

	if (outside_exit())
		return;
	key = kprobe ? bpf_get_func_ip(ctx) : (__u64)ctx;
	c = pop(key, &d, &s);
	if (c) {
		finish(ctx, c, d, ret, kprobe);
		leave(s, d);
	} else
		exit_only(ctx, kprobe ? func_at(ctx, key) : (__u32)bpf_get_attach_cookie(ctx), ret);
}

/* The kprobe argument of enter, finish and send, for programs that save
 * the slots in the call: programs serving many functions (kprobes, and
 * raw_tp_capture, which serves every tracepoint), or one (kprobe_one, and
 * fentry_one and tp_btf_one, which save the slots as kprobes do), which
 * knows its capture count as trawl_nr_caps. */
#define KPROBE_MANY 1
#define KPROBE_ONE 2

/* enter fills a framed call's frame with its slots and captures: from
 * the trampoline's ctx, or from c for kprobes. */
static __always_inline void enter(void *ctx, struct call *c, __u32 d, const struct plan *p, int kprobe)
{
	/* Most calls capture nothing: they pay no call for the count. */
	__u64 nr_caps = kprobe == KPROBE_MANY || !p->nr_caps ? p->nr_caps : trawl_nr_caps(p), j = 0;
	struct frame *f;

	if (track_on && !track_entry(ctx, c, p, kprobe, &j))
		return;
	take_stack(ctx, c);
	/* A call needs a frame to copy memory, to give a --filter
	 * expression a record to read, or to keep its journey. */
	if (!(nr_caps || filter_at || (show_on && p->flags & PLAN_SHOW) || j) || !(f = new_frame(c, d))) {
		if (track_on && !filter_at)
			track_start(ctx, c, p, kprobe);
		return;
	}
	f->rec.stack = c->stack;
	f->rec.track = j;
	if (kprobe)
		__builtin_memcpy(f->rec.slots, c->slots, sizeof(c->slots));
	else
		trampoline_slots(ctx, f->rec.slots, p);
	if (!capture(f, p, nr_caps, c->flags & CALL_TRACKED)) {
		c->flags |= CALL_DROP;
		refuse_entry(c);
		return;
	}
	if (track_on)
		track_start(ctx, c, p, kprobe);
}

#endif
