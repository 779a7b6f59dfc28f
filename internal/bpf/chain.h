/* SPDX-License-Identifier: GPL-2.0 */
/* Error chains (--entry with --errors), part of capture.c: the calls that
 * failed in turn, kept in the kernel until their entry call returns
 * (entry.go). */
#ifndef TRAWL_CHAIN_H
#define TRAWL_CHAIN_H

/* Error chains (--entry with --errors). Inside an entry call, a call
 * that returns an error is kept in the kernel, not sent: the chains map
 * holds its record by task and depth. The calls that fail form a chain
 * while each one's caller fails in turn: the first, innermost one is the
 * origin, and the task's shadow notes the chain's outermost call
 * (chain_top) and its origin. A call that fails and is not the caller of
 * the chain's outermost call, or fails with another error number (NULL
 * counting as 0), starts a new chain: the old error was handled, or this
 * one appeared here. A caller that returns no error ends the chain.
 * When the entry call returns an error (and --errno, --min-duration, on
 * the entry call's duration, and a --filter using ret keep it), its chain
 * is sent, origin first, so that the calls come
 * in the order they ended; else the kept records are dropped, counted as
 * filtered at exit.
 * The buffer is bounded: MAX_DEPTH calls per task, and the map's size
 * over all tasks; records it evicted are counted as missed. */

/* --entry with --errors: send the error chains of failed entry calls only
 * (see chain_exit). */
FEATURE(__u32 error_chains) = 0;

/* A chain's number is this CPU's count of chains sent, with the CPU in
 * its low CHAIN_CPU_BITS bits: unique for the first 2^20 chains of each of
 * up to 4096 CPUs, without an atomic fetch-and-add, which kernels before
 * 5.12 refuse even in code that never runs. */
#define CHAIN_CPU_BITS 12

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, struct frame_key);
	__type(value, struct frame);
} chains SEC(".maps");

static __always_inline void count_n(__u32 c, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		*v += n;
}

/* chain_record returns the finished record of call c at depth d, which
 * returned ret: its frame, or the per-CPU scratch frame filled as send
 * fills a record. */
static __always_inline struct frame *chain_record(void *ctx, struct call *c, __u32 d, __u64 ret, int kprobe)
{
	struct frame *f = 0;
	struct scratch *sc;

	if (c->flags & CALL_FRAMED)
		f = frame_of(c, d);
	if (!f) {
		if (!(sc = get_scratch()))
			return 0;
		f = &sc->frame;
		__builtin_memset(&f->rec, 0, sizeof(f->rec));
		f->rec.entry_ts = c->entry_ts;
		f->rec.func = c->func;
		f->rec.depth = d;
		f->rec.stack = c->stack;
		f->rec.flags = REC_ENTRY | (c->flags & CALL_FRAMED ? REC_TRUNCATED : 0);
		for (int i = 0; i < MAX_SLOTS; i++) {
			__u64 v = 0;

			if (i >= c->nr_slots)
				break;
			if (kprobe)
				v = c->slots[i];
			else
				bpf_get_func_arg(ctx, i, &v);
			f->rec.slots[i] = v;
		}
	}
	f->rec.exit_ts = bpf_ktime_get_ns();
	f->rec.ret = ret;
	f->rec.flags |= REC_EXIT;
	f->rec.cpu = bpf_get_smp_processor_id();
	f->rec.chain = 0;
	who(&f->rec);
	f->rec.ustack = ustack(ctx);
	return f;
}

/* drop_chain forgets the task's chain, counting its calls as filtered. */
static __always_inline void drop_chain(struct shadow *s)
{
	if (s->chain_top) {
		count_n(CNT_FILTERED_EXIT, s->origin + 2 - s->chain_top);
		s->chain_top = 0;
	}
}

/* output sends a kept or finished record to user space. */
static __always_inline void output(struct frame *f)
{
	__u32 len = f->rec.data_len;

	if (len > MAX_DATA)
		len = MAX_DATA;
	if (bpf_ringbuf_output(&events, f, sizeof(f->rec) + len, 0))
		count(CNT_DROPS);
}

/* send_chain sends the chain of the entry call at depth d, whose record
 * is f: the kept calls from the origin out, then f. */
static __always_inline void send_chain(struct shadow *s, struct frame *f, __u32 d)
{
	struct frame_key key = {.tid = bpf_get_current_pid_tgid()};
	__u32 cnt = CNT_CHAINS, id;
	__u32 origin = s->origin;
	struct frame *k;
	__u64 *n;

	count(CNT_CHAINS);
	n = bpf_map_lookup_elem(&counters, &cnt);
	if (!n)
		return;
	id = *n << CHAIN_CPU_BITS | (bpf_get_smp_processor_id() & ((1 << CHAIN_CPU_BITS) - 1));
	for (int i = 0; i < MAX_DEPTH; i++) {
		__u32 at = origin - i;

		if (at <= d || at >= MAX_DEPTH)
			break;
		key.depth = at;
		k = bpf_map_lookup_elem(&chains, &key);
		if (!k || k->rec.entry_ts < f->rec.entry_ts) {
			count(CNT_MISS_CHAIN);
			continue;
		}
		k->rec.chain = id;
		if (at == origin)
			k->rec.flags |= REC_ORIGIN;
		output(k);
	}
	f->rec.chain = id;
	if (origin == d)
		f->rec.flags |= REC_ORIGIN;
	output(f);
}

/* chain_exit ends call c at depth d, which returned ret, in an error
 * chain: it keeps the call if it fails, and sends or drops the chain when
 * c is the entry call. */
static __always_inline void chain_exit(void *ctx, struct call *c, __u32 d, __u64 ret, int kprobe)
{
	struct shadow *s = get_shadow(0);
	const struct plan *p = bpf_map_lookup_elem(&plans, &c->func);
	int entry = c->flags & CALL_ENTRY;
	struct frame_key key;
	__u32 e;
	struct frame *f;

	count(CNT_CALLS);
	if (!s || !p)
		return;
	if (!is_error(p, ret)) {
		count(CNT_FILTERED_EXIT);
		if (entry || (s->chain_top && d + 1 < s->chain_top))
			drop_chain(s);
		return;
	}
	e = errno_of(p, ret);
	if (!s->chain_top || d + 2 != s->chain_top || e != s->chain_errno) {
		drop_chain(s);
		s->origin = d;
		s->chain_errno = e;
	}
	s->chain_top = d + 1;
	f = chain_record(ctx, c, d, ret, kprobe);
	if (!f) {
		count(CNT_MISS_CHAIN);
		if (entry)
			s->chain_top = 0;
		return;
	}
	if (!entry) {
		key.tid = bpf_get_current_pid_tgid();
		key.depth = d;
		if (bpf_map_update_elem(&chains, &key, f, BPF_ANY))
			count(CNT_MISS_CHAIN);
		return;
	}
	if (errno_passes(p, ret) && f->rec.exit_ts - f->rec.entry_ts >= min_duration &&
	    (filter_at != FILTER_AT_EXIT || trawl_filter(&f->rec))) {
		send_chain(s, f, d);
		s->chain_top = 0;
		return;
	}
	drop_chain(s);
}

#endif
