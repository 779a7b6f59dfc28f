/* SPDX-License-Identifier: GPL-2.0 */
/* Captures, part of capture.c: the memory behind a call's pointer
 * arguments, copied into its frame as its plan says (internal/plan). */
#ifndef TRAWL_MEMORY_H
#define TRAWL_MEMORY_H

/* copy reads a capture into data[off...], from kernel memory or else from
 * user memory (a char * or struct pointer may be either). */
static __always_inline long copy(struct frame *f, __u32 off, const struct cap *c, __u64 ptr)
{
	__u32 size = c->size;
	void *dst;
	long n;

	if (size > MAX_DATA - off)
		size = MAX_DATA - off;
	/* Keep the masks: the compiler knows off < MAX_DATA and size <
	 * MAX_CAP (the loader caps plan sizes), but the verifier may have lost
	 * those bounds, and needs them to check dst + size. */
	asm volatile("" : "+r"(off), "+r"(size));
	size &= MAX_CAP - 1;
	dst = &f->data[off & (MAX_DATA - 1)];
	if (c->kind == CAP_STR || c->kind == CAP_DEEP_STR) {
		n = bpf_probe_read_kernel_str(dst, size, (void *)ptr);
		if (n < 0)
			n = bpf_probe_read_user_str(dst, size, (void *)ptr);
		return n;
	}
	n = bpf_probe_read_kernel(dst, size, (void *)ptr);
	if (n < 0)
		n = bpf_probe_read_user(dst, size, (void *)ptr);
	return n < 0 ? n : size;
}

/* slot returns slot i of f's record, 0 past the last: bounded by a check,
 * not by a mask, as MAX_SLOTS is no power of 2 (a mask of MAX_SLOTS - 1
 * read slots 4-7 as 0-3). */
static __always_inline __u64 slot(struct frame *f, __u32 i)
{
	return i < MAX_SLOTS ? f->rec.slots[i] : 0;
}

/* Sized buffers (CAP_BUF*): a pointer argument and the argument holding
 * its length, copied at entry, or at exit for a buffer the function fills. */

/* buf_len returns the length in slot c->len_slot of f, as an unsigned
 * integer of c->len_size bytes (1, 2, 4 or 8). */
static __always_inline __u64 buf_len(struct frame *f, const struct cap *c)
{
	__u32 sh = (64 - 8 * c->len_size) & 63;

	return slot(f, c->len_slot) << sh >> sh;
}

/* copy_buf copies len bytes of a sized buffer, at most c->size, into
 * data[off...], from kernel memory or else from user memory. */
static __always_inline long copy_buf(struct frame *f, __u32 off, const struct cap *c, __u64 ptr, __u64 len)
{
	__u32 size = c->size;
	void *dst;
	long n;

	if (len < size)
		size = len;
	if (size > MAX_DATA - off)
		size = MAX_DATA - off;
	asm volatile("" : "+r"(off), "+r"(size));
	size &= MAX_CAP - 1;
	dst = &f->data[off & (MAX_DATA - 1)];
	n = bpf_probe_read_kernel(dst, size, (void *)ptr);
	if (n < 0)
		n = bpf_probe_read_user(dst, size, (void *)ptr);
	return n < 0 ? n : size;
}

/* capture_exit copies the buffer a function of plan p filled, the plan's
 * last capture when PLAN_EXIT_CAPS is set (a plan has one at most, so
 * that exits need no loop), after the entry's captures. */
static __always_inline void capture_exit(struct frame *f, __u64 ret)
{
	const struct plan *p = bpf_map_lookup_elem(&plans, &f->rec.func);
	__u32 off = f->rec.data_len, i;
	const struct cap *c;
	__u64 len;
	long n;

	if (!p || !(p->flags & PLAN_EXIT_CAPS))
		return;
	i = p->nr_caps - 1;
	if (i >= MAX_CAPS || off >= MAX_DATA)
		return;
	/* New values after the check, so that a spill keeps their bounds
	 * (6.1's verifier does not carry a check over to an earlier spill). */
	asm volatile("" : "+r"(i), "+r"(off));
	c = &p->caps[i];
	len = buf_len(f, c);
	if (c->kind == CAP_BUF_RET) {
		/* ret as a signed integer of ret_size bytes: none if negative. */
		__u32 sh = (64 - 8 * p->ret_size) & 63;
		__s64 v = (__s64)(ret << sh) >> sh;

		if (v < 0)
			len = 0;
		else if (v < len)
			len = v;
	}
	n = copy_buf(f, off, c, slot(f, c->slot), len);
	if (n < 0) {
		f->rec.cap_failed |= 1 << i;
		n = 0;
	}
	f->rec.cap_len[i] = n;
	f->rec.data_len = off + n;
}

/* Deeper captures (--depth, PLAN_DEEP): structs behind the pointers
 * that captured structs hold. */

/* deep_ptr returns the pointer capture c follows, read from the data
 * (filled up to off) of the capture that holds it; 0 when that capture
 * was not read. */
static __always_inline __u64 deep_ptr(struct frame *f, const struct cap *c, __u32 off)
{
	__u32 at = c->off;
	__u64 ptr;

	if (f->rec.cap_failed & (1 << (c->slot & 15)) || at + 8 > off)
		return 0;
	asm volatile("" : "+r"(at));
	/* Byte by byte: the offset need not be aligned. */
	__builtin_memcpy(&ptr, &f->data[at & (MAX_DATA - 1)], 8);
	return ptr;
}

/* pkt_ptr returns where the packet of the sk_buff capture c follows
 * starts: its head plus its network_header, or 0 when either was not
 * read or the network header is not set (~0). */
static __always_inline __u64 pkt_ptr(struct frame *f, const struct cap *c, __u32 off)
{
	__u64 head = deep_ptr(f, c, off);
	__u32 at = c->net_at;
	__u16 net;

	if (!head || at + 2 > off)
		return 0;
	asm volatile("" : "+r"(at));
	__builtin_memcpy(&net, &f->data[at & (MAX_DATA - 1)], 2);
	if (net == 0xffff)
		return 0;
	return head + net;
}

/* deep_size returns the bytes capture c, number i, takes in the data
 * from off, n of which were read: a struct takes its whole size, read or
 * not (flagged as failed), so that the offsets of structs stay known. */
static __always_inline long deep_size(struct frame *f, const struct cap *c, int i, __u32 off, long n)
{
	long size = c->size;

	if (c->kind != CAP_MEM && c->kind != CAP_DEEP && c->kind != CAP_PKT)
		return n;
	if (!n)
		f->rec.cap_failed |= 1 << i;
	if (size > MAX_DATA - off)
		size = MAX_DATA - off;
	return size;
}

/* trawl_capture copies capture i of plan p into f's data from off, and
 * returns where the next capture starts. A global function: the verifier
 * checks it once, for any i and off, where a static one was checked again
 * for each capture of each path into the loop (some 165,000 instructions
 * of a kprobe.multi program, seconds of its load under emulation). Before
 * 5.12 a global function cannot take pointers: there the loader makes it
 * static in the program's BTF (configureGlobals), and the verifier checks
 * it at each call as before. */
__noinline __u64 trawl_capture(struct frame *f, const struct plan *p, __u64 i, __u64 off)
{
	const struct cap *c;
	__u64 ptr;
	long n = 0;

	if (!f || !p || i >= MAX_CAPS || off >= MAX_DATA)
		return MAX_DATA;
	c = &p->caps[i];
	ptr = slot(f, c->slot);
	if (c->kind == CAP_DEEP || c->kind == CAP_DEEP_STR)
		ptr = deep_ptr(f, c, off);
	else if (c->kind == CAP_PKT)
		ptr = pkt_ptr(f, c, off);
	else if (c->kind == CAP_MEM && ptr)
		ptr += c->off; /* a window of the struct, past its start */
	if (c->kind == CAP_PATH)
		n = copy_path(f, off, c);
	else if (ptr && c->kind >= CAP_BUF && c->kind <= CAP_BUF_RET)
		n = copy_buf(f, off, c, ptr, c->kind == CAP_BUF ? buf_len(f, c) : 0);
	else if (ptr)
		n = copy(f, off, c, ptr);
	if (n < 0) {
		f->rec.cap_failed |= 1 << i;
		n = 0;
	}
	if (p->flags & PLAN_DEEP)
		n = deep_size(f, c, i, off, n);
	f->rec.cap_len[i] = n;
	return off + n;
}

/* capture runs the entry filter (unless the call is tracked), then follows the first nr_caps of the
 * plan's pointers. It returns 0 for a call the filter refused. */
static __always_inline int capture(struct frame *f, const struct plan *p, __u64 nr_caps, int tracked)
{
	__u32 off = 0;

	if (!tracked && !entry_passes(f))
		return 0;
	for (int i = 0; i < MAX_CAPS; i++) {
		if (i >= nr_caps)
			break;
		if (off >= MAX_DATA) {
			f->rec.flags |= REC_TRUNCATED;
			break;
		}
		off = trawl_capture(f, p, i, off);
	}
	f->rec.data_len = off;
	return 1;
}

/* trawl_nr_caps returns how many captures plan p has. In each program
 * loaded for one function (fentry, fsession), the loader replaces this
 * body with "r0 = N; exit", N the function's count: being static, it is
 * verified as part of its caller, which then knows N and walks the
 * capture loop N times rather than MAX_CAPS. Programs serving many
 * functions keep this body; the programs serving many functions that
 * save the slots in the call (kprobes, raw_tp_capture), verified once,
 * read p->nr_caps without the call. */
static __noinline __u64 trawl_nr_caps(const struct plan *p)
{
	__u64 n = p->nr_caps;

	/* Keep the compiler from reasoning about the result. */
	asm volatile("" : "+r"(n));
	return n;
}

#endif
