//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* trawl's generic capture program. One program serves every traced
 * function: the function's plan, found through the attach cookie, says
 * which argument slots to read and which pointers to follow. Entries push a
 * call on the task's shadow stack (task storage, freed with the task) and
 * fill its frame (in the frames map, by task and depth); the exit pops it
 * and sends one record for the whole call. Use frame_of() to reach the
 * frame of a depth: it checks the frame still belongs to that call. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "capture.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader. */
volatile const __u32 filter_pids = 0;   /* only tasks in the pids map */
volatile const char filter_comm[16] = {}; /* only this comm, if set */
volatile const __u64 filter_cgroup = 0; /* only tasks in this cgroup (v2 id) */
volatile const __u64 min_duration = 0;  /* only calls this long (ns) */
volatile const __u32 filter_errors = 0; /* only calls returning an error */
volatile const __u32 filter_at = 0;     /* where trawl_filter runs: FILTER_AT_* */
volatile const __u16 regs_size = 0;     /* sizeof(struct pt_regs) */
volatile const __u16 regs_sp = 0;       /* offset of the stack pointer */
volatile const __u16 regs_ret = 0;      /* offset of the return register */

/* armed is set by the loader once every link is attached. Until then an
 * exit without its entry is a call that was in flight while attaching (the
 * exit link goes in first), not a lost event: it is neither counted nor
 * sent. */
volatile __u32 armed = 0;

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

/* Frames of calls in flight. LRU: frames of tasks that died mid-call go
 * first when the map is full. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct frame_key);
	__type(value, struct frame);
} frames SEC(".maps");

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

/* Filters. Every backend gets them through four shared helpers, so a new
 * program needs no filter code of its own if it keeps this shape:
 *
 *   entry: p = plan_of(); f = push(...)   -> wanted(): pid, comm, cgroup
 *          fill f->rec.slots[0..nr_slots)
 *          capture(f, p)                  -> entry_passes(): --filter on args
 *   exit:  f = pop(func) or the session's frame; emit(f, ret)
 *                                         -> exit_passes(): --min-duration,
 *                                            --errors, --filter using ret
 *          no frame: exit_only(func, ret)
 *
 * A call the entry filter refuses keeps its frame, flagged REC_DROP, so
 * that its exit still pops it and then drops it; capture() returns 0 for
 * it (a session program may then pop the frame itself and skip its exit).
 *
 * --filter expressions are compiled per function by internal/filter into
 * the body of trawl_filter, which the loader splices into each program
 * that calls it: for a program serving many functions, the body dispatches
 * on r->func. */
#define FILTER_AT_ENTRY 1 /* the expression uses arguments only */
#define FILTER_AT_EXIT 2  /* the expression uses ret */

/* trawl_filter returns whether call r passes the --filter expression (at
 * exit, r->ret is set). The loader replaces this body; being global, it is
 * verified on its own, against this prototype (r may be NULL as far as the
 * verifier knows). */
__noinline int trawl_filter(struct record *r)
{
	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(r));
	return r != 0;
}

static __always_inline int wanted(__u32 tgid)
{
	if (filter_pids && !bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	if (filter_cgroup && bpf_get_current_cgroup_id() != filter_cgroup)
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

/* entry_passes runs an arguments-only --filter expression at entry. */
static __always_inline int entry_passes(struct frame *f)
{
	if (filter_at != FILTER_AT_ENTRY || trawl_filter(&f->rec))
		return 1;
	f->rec.flags |= REC_DROP;
	count(CNT_FILTERED_EXPR);
	return 0;
}

/* capture runs the entry filter, then follows the plan's pointers. It
 * returns 0 for a call the filter refused. */
static __always_inline int capture(struct frame *f, const struct plan *p)
{
	__u32 off = 0;

	if (!entry_passes(f))
		return 0;
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
	return 1;
}

/* slot_of masks a depth already checked against MAX_DEPTH: the compiler
 * drops the mask as redundant, and some verifiers lose the check's bound. */
static __always_inline __u32 slot_of(__u32 d)
{
	asm volatile("" : "+r"(d));
	return d & (MAX_DEPTH - 1);
}

/* frame_of returns the frame of the call at depth d of the current task,
 * or 0 when the frames map lost it (evicted, or reused by a later call). */
static __always_inline struct frame *frame_of(struct shadow *s, __u32 d)
{
	struct frame_key key = {.tid = bpf_get_current_pid_tgid(), .depth = d};
	struct frame *f;

	if (d >= MAX_DEPTH)
		return 0;
	f = bpf_map_lookup_elem(&frames, &key);
	if (!f || f->rec.entry_ts != s->stamps[slot_of(d)]) {
		count(CNT_MISS_STORAGE);
		return 0;
	}
	return f;
}

/* new_frame returns the frame to fill for depth d, making it from the
 * per-CPU scratch frame the first time the task reaches that depth. */
static __always_inline struct frame *new_frame(__u32 tid, __u32 d)
{
	struct frame_key key = {.tid = tid, .depth = d};
	struct frame *f = bpf_map_lookup_elem(&frames, &key);
	struct scratch *sc;

	if (f)
		return f;
	sc = get_scratch();
	if (!sc)
		return 0;
	bpf_map_update_elem(&frames, &key, &sc->frame, BPF_ANY);
	return bpf_map_lookup_elem(&frames, &key);
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
	s->funcs[slot_of(d)] = func;
	s->stamps[slot_of(d)] = 0;
	f = new_frame(id, d);
	if (!f) {
		count(CNT_MISS_STORAGE);
		return 0;
	}
	f->rec.entry_ts = bpf_ktime_get_ns();
	s->stamps[slot_of(d)] = f->rec.entry_ts;
	f->rec.func = func;
	f->rec.tgid = id >> 32;
	f->rec.pid = id;
	f->rec.flags = REC_ENTRY;
	f->rec.depth = d;
	f->rec.cap_failed = 0;
	bpf_get_current_comm(f->rec.comm, sizeof(f->rec.comm));
	return f;
}

/* pop finds the frame of the call that returns: the innermost call of
 * func. Calls above it are calls whose exit was missed. Without one, the
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
		if (s->funcs[slot_of(d)] == func) {
			if (s->depth - d > 1)
				count(CNT_MISS_EXIT);
			s->depth = d;
			return frame_of(s, d);
		}
	}
	return 0;
}

#define MAX_ERRNO 4095

/* is_error says whether func returned an error, by its plan's err_kind. */
static __always_inline int is_error(__u32 func, __u64 ret)
{
	const struct plan *p = bpf_map_lookup_elem(&plans, &func);
	__s64 v = ret;

	if (!p)
		return 0;
	if (p->err_kind == ERR_PTR)
		return ret == 0 || ret >= (__u64)-MAX_ERRNO;
	if (p->err_kind != ERR_NEG)
		return 0;
	if (p->ret_size == 1)
		v = (__s8)ret;
	else if (p->ret_size == 2)
		v = (__s16)ret;
	else if (p->ret_size == 4)
		v = (__s32)ret;
	return v < 0 && v >= -MAX_ERRNO;
}

/* exit_passes runs the exit filters on a call whose ret and exit_ts are
 * set. A call without its entry passes only filters that need no entry. */
static __always_inline int exit_passes(struct frame *f)
{
	int entry = f->rec.flags & REC_ENTRY;

	if (f->rec.flags & REC_DROP)
		return 0; /* counted at entry */
	if (min_duration && (!entry || f->rec.exit_ts - f->rec.entry_ts < min_duration)) {
		count(CNT_FILTERED_EXIT);
		return 0;
	}
	if (filter_errors && !is_error(f->rec.func, f->rec.ret)) {
		count(CNT_FILTERED_EXIT);
		return 0;
	}
	if (filter_at && (!entry || (filter_at == FILTER_AT_EXIT && !trawl_filter(&f->rec)))) {
		count(CNT_FILTERED_EXPR);
		return 0;
	}
	return 1;
}

/* emit sends a call that passes the exit filters. */
static __always_inline void emit(struct frame *f, __u64 ret)
{
	__u32 len = f->rec.data_len;

	f->rec.exit_ts = bpf_ktime_get_ns();
	f->rec.ret = ret;
	f->rec.flags |= REC_EXIT;
	f->rec.cpu = bpf_get_smp_processor_id();
	count(CNT_CALLS);
	if (!exit_passes(f))
		return;
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
	if (!armed)
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

/* trampoline_slots reads the argument slots a trampoline saved (5.17). */
static __always_inline void trampoline_slots(void *ctx, struct frame *f, const struct plan *p)
{
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (i >= p->nr_slots)
			break;
		bpf_get_func_arg(ctx, i, &f->rec.slots[i]);
	}
}

/* finish sends the call that returns: with its entry frame, or flagged
 * as an exit without one. */
static __always_inline void finish(__u32 func, __u64 ret)
{
	struct frame *f = pop(func);

	if (f)
		emit(f, ret);
	else
		exit_only(func, ret);
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
	trampoline_slots(ctx, f, p);
	capture(f, p);
	return 0;
}

SEC("fexit/trawl_placeholder")
int fexit_capture(void *ctx)
{
	__u64 ret = 0;
	__u32 func = bpf_get_attach_cookie(ctx);

	bpf_get_func_ret(ctx, &ret);
	finish(func, ret);
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

/* kprobe_slots reads the argument slots from the copy of pt_regs, or from
 * the stack for arguments the ABI puts there. */
static __always_inline void kprobe_slots(struct frame *f, const struct plan *p, struct scratch *sc)
{
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
	kprobe_slots(f, p, sc);
	capture(f, p);
	return 0;
}

SEC("kretprobe.multi")
int kretprobe_capture(void *ctx)
{
	struct scratch *sc = get_scratch();
	__u32 func = bpf_get_attach_cookie(ctx);
	__u64 ret;

	if (!sc || copy_regs(sc, ctx))
		return 0;
	ret = reg(sc, regs_ret);
	finish(func, ret);
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

/* Session programs run once at entry and once at exit of each call, and
 * the two runs share an 8-byte cookie per call: kprobe.session (6.10) and
 * fsession (7.0; fsession.multi on the tracing_multi link, 7.2 x86-64).
 * Captured data still lives on the task's shadow stack, a frame being too
 * big for the cookie; the cookie pairs entry and exit exactly: the entry
 * stores its depth + 1 there, and the exit pops to that depth, with no
 * search and no exit without its entry. An entry that keeps nothing leaves
 * the cookie 0; a kprobe.session entry also returns 1, and the kernel then
 * skips the exit run altogether (fsession programs must return 0).
 *
 * The session kfuncs take ctx from 7.0 and nothing before. The loader
 * resolves these calls itself (internal/backend), and the same
 * instructions pass both verifiers: a kfunc without parameters ignores r1. */
extern _Bool bpf_session_is_return(void *ctx) __ksym;
extern __u64 *bpf_session_cookie(void *ctx) __ksym;

/* session_entry pushes a frame for func and notes its depth in the
 * session cookie. It returns the frame to fill, or 0 with *skip set when
 * the exit run is not needed. */
static __always_inline struct frame *session_entry(void *ctx, __u32 func, const struct plan *p, int *skip)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	struct shadow *s = 0;
	struct frame *f;

	*skip = 1;
	if (!cookie)
		return 0;
	*cookie = 0;
	f = push(&s, func, p);
	if (!s)
		return 0; /* filtered, or no task storage: nothing to pop */
	*cookie = s->depth; /* depth + 1 of this call */
	*skip = 0;
	return f;
}

/* session_exit pops the call's frame, and frames above it whose exit was
 * missed, and sends the call. */
static __always_inline void session_exit(void *ctx, __u64 ret)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	struct shadow *s = bpf_task_storage_get(&shadows, bpf_get_current_task_btf(), 0, 0);
	struct frame *f;
	__u32 d;

	if (!cookie || !*cookie || !s)
		return;
	d = *cookie - 1;
	if (s->depth > d + 1)
		count(CNT_MISS_EXIT);
	s->depth = d;
	f = frame_of(s, d);
	if (f)
		emit(f, ret);
}

/* Loaded through internal/kernel/rawbpf as fsession (7.0) or
 * fsession.multi (7.2, x86-64): cilium/ebpf v0.22 cannot attach either. */
SEC("fsession/trawl_placeholder")
int fsession_capture(void *ctx)
{
	const struct plan *p;
	struct frame *f;
	__u64 ret = 0;
	__u32 func;
	int skip;

	if (bpf_session_is_return(ctx)) {
		bpf_get_func_ret(ctx, &ret);
		session_exit(ctx, ret);
		return 0;
	}
	p = plan_of(ctx, &func);
	if (!p || !(f = session_entry(ctx, func, p, &skip)))
		return 0;
	trampoline_slots(ctx, f, p);
	capture(f, p);
	return 0;
}

SEC("kprobe.session")
int kprobe_session_capture(void *ctx)
{
	const struct plan *p;
	struct scratch *sc;
	struct frame *f;
	__u32 func;
	int skip;

	sc = get_scratch();
	if (bpf_session_is_return(ctx)) {
		/* Pop the frame even when the registers cannot be read. */
		session_exit(ctx, sc && !copy_regs(sc, ctx) ? reg(sc, regs_ret) : 0);
		return 0;
	}
	p = plan_of(ctx, &func);
	if (!p || !sc || copy_regs(sc, ctx))
		return 1;
	f = session_entry(ctx, func, p, &skip);
	if (!f)
		return skip;
	kprobe_slots(f, p, sc);
	capture(f, p);
	return 0;
}
