//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* trawl's generic capture program. One program serves every traced
 * function: the function's plan, found through the attach cookie, says
 * which argument slots to read and which pointers to follow. Entries push a
 * frame on the task's shadow stack (task storage, freed with the task); the
 * exit pops it and sends one record for the whole call. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "capture.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader. */
volatile const __u32 filter_pids = 0;   /* only tasks in the pids map */
volatile const char filter_comm[16] = {}; /* only this comm, if set */
volatile const __u16 regs_size = 0;     /* sizeof(struct pt_regs) */
volatile const __u16 regs_sp = 0;       /* offset of the stack pointer */
volatile const __u16 regs_ret = 0;      /* offset of the return register */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, __u32);
	__type(value, struct plan);
} plans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct shadow);
} shadows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Per-CPU scratch: a copy of pt_regs, and a frame for exits whose entry
 * was missed. */
struct scratch {
	__u8 regs[512];
	struct frame frame;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratches SEC(".maps");

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

static __always_inline void count(__u32 c)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		*v += 1;
}

static __always_inline struct scratch *get_scratch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&scratches, &zero);
}

static __always_inline int wanted(__u32 tgid)
{
	if (filter_pids && !bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	if (filter_comm[0]) {
		char comm[16];
		bpf_get_current_comm(comm, sizeof(comm));
		for (int i = 0; i < 16; i++) {
			if (comm[i] != filter_comm[i])
				return 0;
			if (!comm[i])
				break;
		}
	}
	return 1;
}

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
	if (c->kind == CAP_STR) {
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

/* capture follows the plan's pointers. */
static __always_inline void capture(struct frame *f, const struct plan *p)
{
	__u32 off = 0;

	for (int i = 0; i < MAX_CAPS; i++) {
		if (i >= p->nr_caps)
			break;
		const struct cap *c = &p->caps[i];
		__u64 ptr = f->rec.slots[c->slot & (MAX_SLOTS - 1)];
		long n = 0;

		if (off >= MAX_DATA) {
			f->rec.flags |= REC_TRUNCATED;
			break;
		}
		if (ptr)
			n = copy(f, off, c, ptr);
		if (n < 0) {
			f->rec.cap_failed |= 1 << i;
			n = 0;
		}
		f->rec.cap_len[i] = n;
		off += n;
	}
	f->rec.data_len = off;
}

/* push starts a frame for a call; its slots are filled by the caller. */
static __always_inline struct frame *push(struct shadow **sp, __u32 func, const struct plan *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct shadow *s;
	struct frame *f;
	__u32 d;

	if (!wanted(id >> 32)) {
		count(CNT_FILTERED);
		return 0;
	}
	s = bpf_task_storage_get(&shadows, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s) {
		count(CNT_MISS_STORAGE);
		return 0;
	}
	*sp = s;
	d = s->depth++;
	if (d >= MAX_DEPTH) {
		count(CNT_MISS_DEPTH);
		return 0;
	}
	f = &s->frames[d];
	f->rec.entry_ts = bpf_ktime_get_ns();
	f->rec.func = func;
	f->rec.tgid = id >> 32;
	f->rec.pid = id;
	f->rec.flags = REC_ENTRY;
	f->rec.depth = d;
	f->rec.cap_failed = 0;
	bpf_get_current_comm(f->rec.comm, sizeof(f->rec.comm));
	return f;
}

/* pop finds the frame of the call that returns: the innermost frame of
 * func. Frames above it are calls whose exit was missed. Without one, the
 * entry was missed (or filtered): the exit is sent only when unfiltered. */
static __always_inline struct frame *pop(__u32 func)
{
	struct shadow *s = bpf_task_storage_get(&shadows, bpf_get_current_task_btf(), 0, 0);
	__u32 d;

	if (!s || !s->depth)
		return 0;
	d = s->depth;
	if (d > MAX_DEPTH) {
		/* This call or an inner one had no frame. */
		s->depth--;
		return 0;
	}
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (d == 0)
			break;
		d--;
		struct frame *f = &s->frames[d & (MAX_DEPTH - 1)];
		if (f->rec.func == func) {
			if (s->depth - d > 1)
				count(CNT_MISS_EXIT);
			s->depth = d;
			return f;
		}
	}
	return 0;
}

static __always_inline void emit(struct frame *f, __u64 ret)
{
	__u32 len = f->rec.data_len;

	f->rec.exit_ts = bpf_ktime_get_ns();
	f->rec.ret = ret;
	f->rec.flags |= REC_EXIT;
	f->rec.cpu = bpf_get_smp_processor_id();
	count(CNT_CALLS);
	if (len > MAX_DATA)
		len = MAX_DATA;
	if (bpf_ringbuf_output(&events, f, sizeof(f->rec) + len, 0))
		count(CNT_DROPS);
}

/* exit_only sends an exit whose entry frame is missing. */
static __always_inline void exit_only(__u32 func, __u64 ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct scratch *s;

	if (!wanted(id >> 32))
		return;
	count(CNT_MISS_ENTRY);
	s = get_scratch();
	if (!s)
		return;
	__builtin_memset(&s->frame.rec, 0, sizeof(s->frame.rec));
	s->frame.rec.func = func;
	s->frame.rec.tgid = id >> 32;
	s->frame.rec.pid = id;
	bpf_get_current_comm(s->frame.rec.comm, sizeof(s->frame.rec.comm));
	emit(&s->frame, ret);
}

static __always_inline const struct plan *plan_of(void *ctx, __u32 *func)
{
	*func = bpf_get_attach_cookie(ctx);
	return bpf_map_lookup_elem(&plans, func);
}

SEC("fentry/trawl_placeholder")
int fentry_capture(void *ctx)
{
	struct shadow *s;
	const struct plan *p;
	struct frame *f;
	__u32 func;

	p = plan_of(ctx, &func);
	if (!p || !(f = push(&s, func, p)))
		return 0;
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (i >= p->nr_slots)
			break;
		bpf_get_func_arg(ctx, i, &f->rec.slots[i]);
	}
	capture(f, p);
	return 0;
}

SEC("fexit/trawl_placeholder")
int fexit_capture(void *ctx)
{
	struct frame *f;
	__u64 ret = 0;
	__u32 func = bpf_get_attach_cookie(ctx);

	bpf_get_func_ret(ctx, &ret);
	f = pop(func);
	if (f)
		emit(f, ret);
	else
		exit_only(func, ret);
	return 0;
}

/* reg reads 8 bytes at off in the scratch copy of pt_regs. */
static __always_inline __u64 reg(struct scratch *sc, __u32 off)
{
	return *(__u64 *)&sc->regs[off & (sizeof(sc->regs) - 8)];
}

static __always_inline int copy_regs(struct scratch *sc, void *ctx)
{
	return bpf_probe_read_kernel(sc->regs, regs_size & (sizeof(sc->regs) - 1), ctx);
}

SEC("kprobe.multi")
int kprobe_capture(void *ctx)
{
	struct shadow *s;
	const struct plan *p;
	struct scratch *sc;
	struct frame *f;
	__u32 func;

	p = plan_of(ctx, &func);
	if (!p || !(sc = get_scratch()) || copy_regs(sc, ctx))
		return 0;
	if (!(f = push(&s, func, p)))
		return 0;
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (i >= p->nr_slots)
			break;
		__u16 src = p->src[i];
		if (src & SRC_STACK) {
			__u64 sp = reg(sc, regs_sp);
			bpf_probe_read_kernel(&f->rec.slots[i], 8, (void *)(sp + (src & ~SRC_STACK)));
		} else {
			f->rec.slots[i] = reg(sc, src);
		}
	}
	capture(f, p);
	return 0;
}

SEC("kretprobe.multi")
int kretprobe_capture(void *ctx)
{
	struct scratch *sc = get_scratch();
	__u32 func = bpf_get_attach_cookie(ctx);
	struct frame *f;
	__u64 ret;

	if (!sc || copy_regs(sc, ctx))
		return 0;
	ret = reg(sc, regs_ret);
	f = pop(func);
	if (f)
		emit(f, ret);
	else
		exit_only(func, ret);
	return 0;
}

/* follow_fork adds children of traced processes to the pids map. */
SEC("tp_btf/sched_process_fork")
int follow_fork(__u64 *ctx)
{
	struct task_struct *parent = (void *)ctx[0], *child = (void *)ctx[1];
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (filter_pids && bpf_map_lookup_elem(&pids, &ptgid))
		bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY);
	return 0;
}
