//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* trawl's generic capture program. One program serves every traced
 * function: the function's plan, found through the attach cookie, says
 * which argument slots to read and which pointers to follow. Entries push a
 * call on the task's shadow stack (task storage, freed with the task); the
 * exit pops it and sends one record for the whole call.
 *
 * Most calls take the short way: a call with scalar arguments only is
 * written straight into the ring buffer at exit, from its shadow entry and
 * the trampoline's saved arguments (or the slots a kprobe saved). A call
 * that copies memory, or that a --filter expression reads, also fills a
 * frame (in the frames map, by task and depth) at entry, and its exit
 * sends that frame. Use frame_of() to reach the frame of a depth: it
 * checks the frame still belongs to that call. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "capture.h"
#include "kernel.h"

char LICENSE[] SEC("license") = "GPL";

/* The lean build. This file is compiled twice: as it is, and with
 * TRAWL_LEAN defined, for a trace that uses none of the features below
 * (filters, --show, --track, --entry, --stack, the helpers of kernels
 * before 5.11). A FEATURE constant is set by the loader in the full build
 * and is 0 in the lean one, where the compiler drops the code it guards:
 * a volatile constant's load and its branch stay in the verified program
 * even when the verifier prunes the branch, and together they cost a call
 * about 100 instructions (amd64-7.3). The loader picks the lean build
 * when every FEATURE constant it would set is 0 (internal/session). */
#ifdef TRAWL_LEAN
#define FEATURE(decl) static const decl
/* Without the --entry gate, the trampoline programs have no short way to
 * keep apart from the tracing: trace inline (see fentry_call_apart). */
#define APART __always_inline
#else
#define FEATURE(decl) volatile const decl
#define APART __noinline
#endif

/* Set by the loader. */
FEATURE(__u32 filter_pids) = 0;   /* only tasks in the pids map */
FEATURE(char filter_comm[16]) = {}; /* only this comm, if set */
FEATURE(__u64 filter_cgroup) = 0; /* only tasks in this cgroup (v2 id) */
FEATURE(__u32 filter_cgroup_level) = 0; /* its level: 0 for the root */
FEATURE(__u32 filter_cgroup_exact) = 0; /* not in its descendants */
FEATURE(__u64 min_duration) = 0;  /* only calls this long (ns) */
FEATURE(__u32 filter_errors) = 0; /* only calls returning an error */
FEATURE(__u32 filter_at) = 0;     /* where trawl_filter runs: FILTER_AT_* */
volatile const __u32 ip_bits = 1;       /* func_ips has 1 << ip_bits entries */
volatile const __u32 aggregate = 0;     /* --stats: count calls in stats, send none */
FEATURE(__u32 show_on) = 0;       /* some plans have PLAN_SHOW (--show) */
FEATURE(__u32 track_on) = 0;      /* --track: see track_entry */
FEATURE(__u64 track_timeout) = 0; /* --track: ns an object stays tracked unseen; 0: no limit */

/* armed is ARM_OFF while the loader attaches, ARM_ON once every link is
 * attached, ARM_STOPPED when the trace stops, and ARM_OFF again while the
 * links go (enum arm_state in capture.h). Entries are only traced while
 * it is ARM_ON, so a stop takes effect at once at any call rate; calls in
 * flight still end and are sent. An exit without its entry while it is
 * not ARM_ON is a call that was in flight while attaching (the exit link
 * goes in first), not a lost event: it is neither counted nor sent. While
 * ARM_OFF no call is in flight, or none is read any more, and the kprobe
 * and fsession programs return before anything else: every function
 * attached so far runs them while the next links go in or out, the
 * kernel's own work included (a kretprobe.multi program on every function
 * slowed the kprobe.multi link after it 1.7 times over empty programs',
 * amd64-7.3). */
volatile enum arm_state armed = ARM_OFF;

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

/* The address table of the kprobe backends: function addresses, placed
 * by the loader at their hash or up to IP_MAX_PROBES - 1 entries after. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2); /* resized by the loader */
	__type(key, __u32);
	__type(value, struct ip_func);
} func_ips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* --stats: each function's calls that passed the filters and its other
 * figures (at its plan's index), and its errors by errno. All have one
 * entry unless the loader sizes them. The calls are apart from the rest so
 * that user space finds the functions called by reading 8 bytes of each,
 * not every page of stats (2 KiB a function). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} call_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct func_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct errno_key);
	__type(value, __u64);
} errnos SEC(".maps");

/* Per-CPU scratch: the frame that starts a task's frame at a new depth,
 * and holds exits whose entry was missed. */
struct scratch {
	struct frame frame;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratches SEC(".maps");

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

/* Kernels before 5.11 have neither task storage nor
 * bpf_get_current_task_btf. The loader (internal/session, legacy.go) then
 * sets these, and the verifier prunes the branches the kernel cannot run:
 * - shadow_by_tid: the shadows map is an LRU hash keyed by thread id,
 *   bounded by its size; a shadow it cannot make is counted as
 *   CNT_MISS_STORAGE, and one it evicted (a thread quiet for long while
 *   others trace) shows as exits without their entry.
 * - task_by_helpers: the task's ids and name come from the helpers
 *   (bpf_get_current_pid_tgid, bpf_get_current_comm). */
FEATURE(__u32 shadow_by_tid) = 0;
FEATURE(__u32 task_by_helpers) = 0;

/* get_shadow returns the current task's shadow stack, made first if
 * create is set and there is none; 0 without one. */
static __always_inline struct shadow *get_shadow(int create)
{
	__u32 tid;
	struct shadow *s;
	struct scratch *sc;

	if (!shadow_by_tid)
		return bpf_task_storage_get(&shadows, bpf_get_current_task_btf(), 0,
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	tid = bpf_get_current_pid_tgid();
	s = bpf_map_lookup_elem(&shadows, &tid);
	if (s || !create)
		return s;
	/* The per-CPU scratch frame is big enough to be a shadow's first
	 * value: its header is zeroed below, and calls above depth are never
	 * read. */
	sc = get_scratch();
	if (!sc || bpf_map_update_elem(&shadows, &tid, sc, BPF_NOEXIST))
		return 0;
	s = bpf_map_lookup_elem(&shadows, &tid);
	if (s)
		__builtin_memset(s, 0, __builtin_offsetof(struct shadow, calls));
	return s;
}

/* current_comm copies the current task's name. */
static __always_inline void current_comm(__u64 name[2])
{
	if (task_by_helpers)
		bpf_get_current_comm(name, 16);
	else
		read_comm(bpf_get_current_task_btf(), name);
}

/* who fills in the current task's ids and name. */
static __always_inline void who(struct record *r)
{
	struct task_struct *t;
	__u64 id;

	if (task_by_helpers) {
		id = bpf_get_current_pid_tgid();
		r->tgid = id >> 32;
		r->pid = id;
		bpf_get_current_comm(r->comm, sizeof(r->comm));
		return;
	}
	t = bpf_get_current_task_btf();
	r->tgid = t->tgid;
	r->pid = t->pid;
	read_comm(t, (__u64 *)r->comm);
}

/* func_at returns the function a kprobe program runs for, found by its
 * address ip (bpf_get_func_ip) in the address table. The attach cookie
 * says the same, but a kprobe.multi link finds it by a binary search of
 * its addresses, with an indirect call per step: 80 instructions with
 * one function attached (amd64-7.3), more with thousands; the table takes
 * about 27 whatever their number. An address the table lacks falls back
 * to the cookie, counted. */
static __always_inline __u32 func_at(void *ctx, __u64 ip)
{
	__u32 mask = (1U << ip_bits) - 1;
	__u32 h = (ip * IP_HASH_MUL) >> (64 - ip_bits);

	for (int i = 0; i < IP_MAX_PROBES; i++) {
		__u32 k = (h + i) & mask;
		struct ip_func *e = bpf_map_lookup_elem(&func_ips, &k);

		if (!e || !e->ip)
			break;
		if (e->ip == ip)
			return e->func;
	}
	count(CNT_COOKIE_LOOKUPS);
	return bpf_get_attach_cookie(ctx);
}

/* Filters. Every backend gets them through shared helpers, so a new
 * program needs no filter code of its own if it keeps this shape:
 *
 *   entry: c = push(...)                  -> wanted(): pid, comm, cgroup
 *          kprobes: fill c->slots
 *          enter(ctx, c, ...)             -> capture(): copies memory and
 *                                            runs --filter on arguments
 *   exit:  finish_exit() or, for sessions, finish() with the cookie's call
 *                                         -> exit_passes(): --min-duration,
 *                                            --errors; emit(): --filter
 *                                            using ret
 *
 * A call the entry filter refuses stays on the shadow stack, flagged
 * CALL_DROP, so that its exit still pops it and then drops it.
 *
 * --filter expressions are compiled per function by internal/filter into
 * the body of trawl_filter, which the loader splices into each program
 * that calls it: for a program serving many functions, the body dispatches
 * on r->func. */
enum filter_place {
	FILTER_AT_ENTRY = 1, /* the expression uses arguments only */
	FILTER_AT_EXIT = 2,  /* the expression uses ret */
};

/* The enums the Go loader shares. A type reaches the object's BTF, from
 * which bpf2go generates Go (the -type flags of gen.go), only if something
 * in the object refers to it: this pointer, never set nor read, does. */
struct shared {
	enum limit limit;
	enum cap_kind cap_kind;
	enum src_flag src_flag;
	enum err_kind err_kind;
	enum plan_flag plan_flag;
	enum cookie_bit cookie_bit;
	enum rec_flag rec_flag;
	enum ip_hash ip_hash;
	enum counter counter;
	enum filter_place filter_place;
	enum hist_layout hist_layout;
	struct tracked tracked;
};
const struct shared *shared __attribute__((unused));

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

/* --show: expressions compiled per function by internal/filter into the
 * body of trawl_show, which the loader splices in as for trawl_filter. It
 * runs when a framed call returns, after its captures, and appends the
 * values to the frame's data. Being global, it is verified on its own,
 * against this prototype: f may be NULL, and its whole frame is writable. */
__noinline int trawl_show(struct frame *f)
{
	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(f));
	return f != 0;
}

/* in_cgroup says whether the current task is in the cgroup filter_cgroup
 * or, unless filter_cgroup_exact, in one of its descendants: its ancestor
 * at the cgroup's level is the cgroup. */
static __always_inline int in_cgroup(void)
{
	if (filter_cgroup_exact)
		return bpf_get_current_cgroup_id() == filter_cgroup;
	return bpf_get_current_ancestor_cgroup_id(filter_cgroup_level) == filter_cgroup;
}

/* wanted runs the task filters: pid, cgroup and comm. */
static __always_inline int wanted(void)
{
	__u32 tgid;

	if (filter_pids) {
		tgid = bpf_get_current_pid_tgid() >> 32;
		if (!bpf_map_lookup_elem(&pids, &tgid))
			return 0;
	}
	if (filter_cgroup && !in_cgroup())
		return 0;
	if (filter_comm[0]) {
		__u64 name[2];
		char *comm = (char *)name;

		current_comm(name);
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

/* entry_passes runs an arguments-only --filter expression at entry. */
static __always_inline int entry_passes(struct frame *f)
{
	if (filter_at != FILTER_AT_ENTRY || trawl_filter(&f->rec))
		return 1;
	count(CNT_FILTERED_EXPR);
	return 0;
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
	if (c->kind == CAP_DEEP)
		ptr = deep_ptr(f, c, off);
	else if (c->kind == CAP_PKT)
		ptr = pkt_ptr(f, c, off);
	if (ptr && c->kind >= CAP_BUF && c->kind <= CAP_BUF_RET)
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

/* slot_of masks a depth already checked against MAX_DEPTH: the compiler
 * drops the mask as redundant, and some verifiers lose the check's bound. */
static __always_inline __u32 slot_of(__u32 d)
{
	asm volatile("" : "+r"(d));
	return d & (MAX_DEPTH - 1);
}

/* trawl_nr_caps returns how many captures plan p has. In each program
 * loaded for one function (fentry, fsession), the loader replaces this
 * body with "r0 = N; exit", N the function's count: being static, it is
 * verified as part of its caller, which then knows N and walks the
 * capture loop N times rather than MAX_CAPS. Programs serving many
 * functions keep this body; kprobe programs serving many functions,
 * verified once, read p->nr_caps without the call. */
static __noinline __u64 trawl_nr_caps(const struct plan *p)
{
	__u64 n = p->nr_caps;

	/* Keep the compiler from reasoning about the result. */
	asm volatile("" : "+r"(n));
	return n;
}

/* The --entry gate. Functions that --entry selects are planned with
 * PLAN_ENTRY. While entry_gate is set, the other functions are traced only
 * while the task is inside a call of one of them: the outermost such call
 * opens the task's gate (shadow.entry_at), and the gate shuts when the
 * task's stack pops below it. open_gates counts the tasks whose gate is
 * open: while it is 0, as most of the time when entry calls are rare, a
 * call outside costs a counter at entry (and a plan lookup with kprobes;
 * trampolines know an entry function by its attach cookie, see
 * gated_out) and nothing at exit; else a plan and a task storage lookup
 * at entry and one at exit (none at exit with the session backends).
 * Never a ring buffer write. A gate its entry call's exit never shut is
 * shut by a later entry call (stale_gate). A task that dies
 * inside an entry call leaves the count high, which costs time, never a
 * call. An entry call the entry filter refuses keeps its gate open but
 * refused (GATE_REFUSED), so that its exit still finds it. */
FEATURE(__u32 entry_gate) = 0;
__u32 open_gates = 0;
#define GATE_REFUSED 0x80000000
/* --entry with --errors: send the error chains of failed entry calls only
 * (see chain_exit). */
FEATURE(__u32 error_chains) = 0;

/* in_entry says whether the current task is inside an entry call. */
static __always_inline int in_entry(void)
{
	struct shadow *s;

	if (!open_gates)
		return 0;
	s = get_shadow(0);
	return s && s->entry_at && !(s->entry_at & GATE_REFUSED);
}

/* outside_entry says whether a call of plan p is left out by the gate,
 * and counts it. */
static __always_inline int outside_entry(const struct plan *p)
{
	if (!entry_gate || p->flags & PLAN_ENTRY || in_entry())
		return 0;
	count(CNT_OUTSIDE_ENTRY);
	return 1;
}

/* outside_exit says whether an exit is of a call the gate left out: with
 * the gate on, a task with no call on its shadow stack has nothing to pair
 * or send. It costs the exit of a call outside one task storage lookup,
 * before anything else. */
static __always_inline int outside_exit(void)
{
	struct shadow *s;

	if (!entry_gate)
		return 0;
	if (!open_gates)
		return 1;
	s = get_shadow(0);
	return !s || !s->depth;
}

/* gated_out is the short way out of a trampoline program's entry for a
 * call the gate leaves out, before anything else is read: while no task
 * is inside an entry call, a call is outside unless its attach cookie
 * marks an entry function. It counts the call. */
static __always_inline int gated_out(__u64 cookie)
{
	if (!entry_gate || open_gates || cookie >> COOKIE_ENTRY)
		return 0;
	if (armed == ARM_ON)
		count(CNT_OUTSIDE_ENTRY);
	return 1;
}

/* open_gate makes call c at depth d, of plan p, the task's entry call if
 * p is an entry function and the gate is shut. pos is the call's stack
 * position (see stale_gate). */
static __always_inline void open_gate(struct shadow *s, struct call *c, __u32 d, const struct plan *p, __u64 pos)
{
	if (entry_gate && p->flags & PLAN_ENTRY && !s->entry_at) {
		s->entry_at = d + 1;
		s->entry_func = c->func;
		s->entry_pos = pos;
		c->flags = CALL_ENTRY;
		__sync_fetch_and_add(&open_gates, 1);
	}
}

/* A gate goes stale when the exit of its entry call is missed (a
 * recursion miss, a kretprobe the kernel had no room for): it would stay
 * open for good, and the calls of the task traced as inside. A call's
 * stack position is where the kernel stack stood at its entry: the stack
 * pointer for kprobes, ctx (in the trampoline's frame) for trampolines.
 * Stacks grow down, so a new call of the entry function at the position
 * of the gate's entry call or above it is not nested in that call, which
 * must have returned: stale_gate then shuts the gate and pops the calls
 * left from it. Trampoline frames differ in size from one function to
 * another, so only calls of the same function are compared; and only
 * within STACK_SPAN of each other, so that a call on another stack (an
 * interrupt's) is never taken for an outer one. */
#define STACK_SPAN 16384

static __always_inline void drop_chain(struct shadow *s);

static __always_inline void stale_gate(struct shadow *s, __u32 func, __u64 pos)
{
	__u32 at = s->entry_at & ~GATE_REFUSED;
	__u64 lo = s->entry_pos, hi = lo + STACK_SPAN;

	/* Compared, not subtracted: for trampolines pos is ctx, a pointer,
	 * on which the verifier allows no arithmetic; hi kept opaque, so
	 * that the compiler does not make the two checks a subtraction. */
	asm volatile("" : "+r"(hi));
	if (!at || func != s->entry_func || pos < lo || pos >= hi)
		return;
	count(CNT_STALE_GATES);
	count(CNT_MISS_EXIT);
	if (s->chain_top)
		drop_chain(s);
	s->depth = at - 1;
	s->entry_at = 0;
	__sync_fetch_and_add(&open_gates, -1);
}

/* shut_gate shuts the gate once the task's stack popped its entry call. */
static __always_inline void shut_gate(struct shadow *s)
{
	if (entry_gate && s->entry_at && s->depth < (s->entry_at & ~GATE_REFUSED)) {
		s->entry_at = 0;
		__sync_fetch_and_add(&open_gates, -1);
	}
}

/* refuse_entry refuses the gate an entry call opened, when the entry
 * filter refuses that call: calls inside are left out. */
static __always_inline void refuse_entry(struct call *c)
{
	struct shadow *s;

	if (!(c->flags & CALL_ENTRY))
		return;
	s = get_shadow(0);
	if (s)
		s->entry_at |= GATE_REFUSED;
}

/* push starts a call of func, planned by p, at stack position pos (see
 * stale_gate), on the task's shadow stack and returns it, with its depth
 * in *dp, or 0 when the call is not traced (filtered, no storage or too
 * deep). *sp is set once the shadow's depth counts the call. ctx is the
 * program's, a kprobe's if kprobe is set. */
static __always_inline int track_seen(void *ctx, const struct plan *p, int kprobe);

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

/* pop finds the call that returns, the innermost call keyed key (as
 * call.ip), and returns it with its depth in *dp. Calls above
 * it are calls whose exit was missed. Without one, the entry was missed or
 * not traced. */
static __always_inline struct call *pop(__u64 key, __u32 *dp)
{
	struct shadow *s = get_shadow(0);
	struct call *c;
	__u32 d;

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
		s->depth = *dp = d - 1;
		shut_gate(s);
		return c;
	}
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (d == 0)
			break;
		d--;
		c = &s->calls[slot_of(d)];
		if (is_call(c, key)) {
			count(CNT_MISS_EXIT);
			s->depth = *dp = d;
			shut_gate(s);
			return c;
		}
	}
	return 0;
}

#define MAX_ERRNO 4095

/* is_error says whether a function of plan p returned an error. */
static __always_inline int is_error(const struct plan *p, __u64 ret)
{
	__s64 v = ret;

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

/* hist_bucket returns the histogram bucket of a duration of ns. */
static __always_inline __u32 hist_bucket(__u64 ns)
{
	__u32 e, i;

	if (ns < HIST_EXACT)
		return ns;
	e = log2_floor(ns);
	i = HIST_EXACT + ((e - 4) << HIST_SUB_BITS) + ((ns >> (e - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1));
	return i < HIST_BUCKETS ? i : HIST_BUCKETS - 1;
}

/* count_errno counts an error of func in errnos. */
static __always_inline void count_errno(__u32 func, const struct plan *p, __u64 ret)
{
	struct errno_key k = {.func = func};
	__u64 one = 1, *n;
	__s64 v = ret;

	if (p->err_kind == ERR_NEG && p->ret_size == 4)
		v = (__s32)ret;
	else if (p->err_kind == ERR_NEG && p->ret_size == 2)
		v = (__s16)ret;
	else if (p->err_kind == ERR_NEG && p->ret_size == 1)
		v = (__s8)ret;
	k.err = ret ? -v : 0;
	n = bpf_map_lookup_elem(&errnos, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	if (!bpf_map_update_elem(&errnos, &k, &one, BPF_NOEXIST))
		return;
	/* Another CPU may have added it meanwhile. */
	n = bpf_map_lookup_elem(&errnos, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		count(CNT_MISS_ERRNO);
}

/* tally counts a call of func that returned ret in its figures, with its
 * duration if its entry was seen. */
static __always_inline void tally(__u32 func, int entry, __u64 dur, __u64 ret)
{
	struct func_stats *st = bpf_map_lookup_elem(&stats, &func);
	__u64 *calls = bpf_map_lookup_elem(&call_counts, &func);
	const struct plan *p;

	if (!st || !calls)
		return;
	__sync_fetch_and_add(calls, 1);
	if (entry) {
		__sync_fetch_and_add(&st->total_ns, dur);
		__sync_fetch_and_add(&st->hist[hist_bucket(dur) & (HIST_BUCKETS - 1)], 1);
		if (dur > st->max_ns)
			st->max_ns = dur;
	}
	p = bpf_map_lookup_elem(&plans, &func);
	if (p && is_error(p, ret)) {
		__sync_fetch_and_add(&st->errors, 1);
		count_errno(func, p, ret);
	}
}

/* --errno: bit e of errno_kept keeps errno e; bit 0 keeps NULL pointers.
 * Unused unless filter_errno is set. */
FEATURE(__u32 filter_errno) = 0;
FEATURE(__u64 errno_kept[(MAX_ERRNO + 1) / 64]) = {};
/* errno_of returns the error number of the error ret, which a function
 * of plan p returned: 0 for a NULL pointer. */
static __always_inline __u32 errno_of(const struct plan *p, __u64 ret)
{
	__s64 v = ret;

	if (p->ret_size == 1)
		v = (__s8)ret;
	else if (p->ret_size == 2)
		v = (__s16)ret;
	else if (p->ret_size == 4)
		v = (__s32)ret;
	if (v < 0 && v >= -MAX_ERRNO)
		return -v;
	return 0;
}

/* errno_passes runs --errno on a call of plan p that returned the error
 * ret. */
static __always_inline int errno_passes(const struct plan *p, __u64 ret)
{
	__u32 e;

	if (!filter_errno)
		return 1;
	e = errno_of(p, ret);
	return errno_kept[(e >> 6) & ((MAX_ERRNO + 1) / 64 - 1)] >> (e & 63) & 1;
}

/* exit_passes runs --min-duration and --errors on a call that took dur
 * ns (0: its entry was missed) and returned ret. */
static __always_inline int exit_passes(__u32 func, __u64 dur, __u64 ret)
{
	const struct plan *p;

	if (min_duration && dur < min_duration) {
		count(CNT_FILTERED_EXIT);
		return 0;
	}
	if (filter_errors && (!(p = bpf_map_lookup_elem(&plans, &func)) || !is_error(p, ret) || !errno_passes(p, ret))) {
		count(CNT_FILTERED_EXIT);
		return 0;
	}
	return 1;
}

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
		if (!kprobe) {
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
	struct shadow *s = bpf_task_storage_get(&shadows, bpf_get_current_task_btf(), 0, 0);

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

/* emit sends a call from its frame, or an exit without its entry from the
 * scratch frame, if it passes the exit filters (a call of a tracked
 * object, tk set, passes them all). It returns whether it sent the call.
 * track is its journey, see track_exit. */
static __always_inline int emit(struct frame *f, __u64 ret, __u64 track, int tk)
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
		return 0;
	}
	if (entry)
		capture_exit(f, ret);
	if (entry && show_on)
		trawl_show(f);
	who(&f->rec);
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
		return 0;
	}
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
	r->pad = 0;
	r->track = track;
	if (tk & TK_END)
		r->flags |= REC_TRACK_END;
	bpf_ringbuf_submit(r, 0);
	return 1;
}

/* exit_only sends an exit whose entry was missed. */
static __always_inline void exit_only(__u32 func, __u64 ret)
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
	emit(&s->frame, ret, 0, 0);
}

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
		sent = emit(f, ret, track, tk);
	else
		sent = send(ctx, c, d, ret, kprobe, track, tk);
	if (track_on && sent)
		track_after(ctx, c, ret, kprobe);
}

/* finish_exit sends the call that returns, or an exit without its entry. */
static __always_inline void finish_exit(void *ctx, __u64 ret, int kprobe)
{
	__u64 key;
	__u32 d = 0;
	struct call *c;

	if (outside_exit())
		return;
	key = kprobe ? bpf_get_func_ip(ctx) : (__u64)ctx;
	c = pop(key, &d);
	if (c)
		finish(ctx, c, d, ret, kprobe);
	else
		exit_only(kprobe ? func_at(ctx, key) : (__u32)bpf_get_attach_cookie(ctx), ret);
}

/* kprobe_plan finds a kprobe program's plan by the function's address. */
static __always_inline const struct plan *kprobe_plan(void *ctx, __u64 ip, __u32 *func)
{
	*func = func_at(ctx, ip);
	return bpf_map_lookup_elem(&plans, func);
}

/* trampoline_slots reads the argument slots a trampoline saved (5.17). */
static __always_inline void trampoline_slots(void *ctx, __u64 *slots, const struct plan *p)
{
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (i >= p->nr_slots)
			break;
		bpf_get_func_arg(ctx, i, &slots[i]);
	}
}

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

/* The kprobe argument of enter, finish and send: programs serving many
 * functions, or one (kprobe_one, and fentry_one, which saves the slots
 * as kprobes do), which knows its capture count as trawl_nr_caps. */
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

/* The trampoline programs take the gate's short way first (gated_out at
 * entry; at exit, nothing while no gate is open), and trace a call in a
 * function of their own, not inlined, so that the short way pays for no
 * more registers than it uses. With --stack, entries trace inline:
 * bpf_get_stackid unwinds every frame between the program and the traced
 * function, and a BPF frame costs about 800 instructions (amd64-7.3). */

/* fentry_call traces a call of plan index func at its entry. */
static __always_inline void fentry_call(void *ctx, __u32 func)
{
	struct shadow *s;
	const struct plan *p;
	struct call *c;
	__u32 d;

	p = bpf_map_lookup_elem(&plans, &func);
	if (p && (c = push(ctx, &s, &d, func, p, (__u64)ctx, 0)))
		enter(ctx, c, d, p, 0);
}

static APART int fentry_call_apart(void *ctx, __u32 func)
{
	fentry_call(ctx, func);
	return 0;
}

/* trampoline_exit ends a call at its exit. */
static APART int trampoline_exit(void *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	finish_exit(ctx, ret, 0);
	return 0;
}

SEC("fentry/trawl_placeholder")
int fentry_capture(void *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);

	if (gated_out(cookie))
		return 0;
	if (!want_stack)
		return fentry_call_apart(ctx, cookie);
	fentry_call(ctx, cookie);
	return 0;
}

SEC("fexit/trawl_placeholder")
int fexit_capture(void *ctx)
{
	if (entry_gate && !open_gates)
		return 0; /* outside every entry call: see outside_exit */
	return trampoline_exit(ctx);
}

/* kprobe_moved_slots reads the slots of a plan whose slots are not the
 * argument registers in order: from the registers, or from the stack for
 * arguments the ABI puts there. Not inlined, so that the common case does
 * not pay for its registers. */
static __noinline void kprobe_moved_slots(void *ctx, __u64 *slots, const struct plan *p)
{
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (i >= p->nr_slots)
			break;
		__u16 src = p->src[i];
		if (src & SRC_STACK)
			bpf_probe_read_kernel(&slots[i], 8, (void *)(ctx_u64(ctx, REG_SP) + (src & ~SRC_STACK)));
		else
			slots[i] = arg_reg(ctx, src);
	}
}

/* kprobe_slots reads the argument slots: all argument registers at once
 * when the slots are those registers in order, as most often. */
static __always_inline void kprobe_slots(void *ctx, __u64 *slots, const struct plan *p)
{
	if (p->flags & PLAN_REGS_IN_ORDER)
		copy_arg_regs(ctx, slots);
	else
		kprobe_moved_slots(ctx, slots, p);
}

SEC("kprobe.multi")
int kprobe_capture(void *ctx)
{
	struct shadow *s;
	const struct plan *p;
	struct call *c;
	__u32 func, d;
	__u64 ip;

	if (armed != ARM_ON)
		return 0;
	ip = bpf_get_func_ip(ctx);
	p = kprobe_plan(ctx, ip, &func);
	if (!p || !(c = push(ctx, &s, &d, func, p, ctx_u64(ctx, REG_SP), 1)))
		return 0;
	c->ip = ip;
	kprobe_slots(ctx, c->slots, p);
	enter(ctx, c, d, p, 1);
	return 0;
}

SEC("kretprobe.multi")
int kretprobe_capture(void *ctx)
{
	if (armed == ARM_OFF)
		return 0;
	finish_exit(ctx, ctx_u64(ctx, REG_RET), 1);
	return 0;
}

/* Classic kprobes and kretprobes (the kprobe backend), for kernels
 * without kprobe.multi: before 5.15 neither an attach cookie nor
 * bpf_get_func_ip tells a program its function, so the loader loads a copy
 * of these programs per function, in which trawl_func's body becomes
 * "r0 = ID; exit", ID the plan index (and trawl_nr_caps's its capture
 * count, as for fentry). Calls pair by ID at exit (held in
 * call.ip, which no other program of the session reads). */
static __noinline __u32 trawl_func(void)
{
	__u32 id = 0;

	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(id));
	return id;
}

/* one_exit ends a call of func, which returned ret, in a program that
 * serves func alone (kretprobe_one, fexit_one): its slots were saved at
 * entry. */
static __always_inline void one_exit(void *ctx, __u32 func, __u64 ret)
{
	__u32 d = 0;
	struct call *c;

	if (outside_exit())
		return;
	c = pop(func, &d);
	if (c)
		finish(ctx, c, d, ret, KPROBE_ONE);
	else
		exit_only(func, ret);
}

SEC("kretprobe/trawl_placeholder")
int kretprobe_one(void *ctx)
{
	one_exit(ctx, trawl_func(), ctx_u64(ctx, REG_RET));
	return 0;
}

/* Trampolines without bpf_get_func_arg/ret (before 5.17) nor attach
 * cookies (before 6.0): the fentry backend loads a copy of these per
 * function, which knows its plan index (trawl_func) and its slot count
 * (trawl_nr_slots, spliced as trawl_nr_caps is), and reads the slots and
 * the return value straight from the trampoline's context. The entry saves the slots in the call, as kprobes
 * do, for the exit to send. */
static __noinline __u64 trawl_nr_slots(void)
{
	__u64 n = 0;

	/* Keep the compiler from assuming the result. */
	asm volatile("" : "+r"(n));
	return n;
}

/* ctx_slots copies the first n slots of a trampoline's context, and
 * ctx_ret reads the return value an fexit context holds after them. They
 * copy the trampoline's stack, not load from ctx, as before 5.17 the
 * verifier lets a load from ctx take a pointer argument only when it
 * points to a struct. */
static __always_inline void ctx_slots(void *ctx, __u64 n, __u64 *slots)
{
	if (n > MAX_SLOTS)
		n = MAX_SLOTS;
	bpf_probe_read_kernel(slots, n * 8, ctx);
}

static __always_inline __u64 ctx_ret(void *ctx, __u64 n)
{
	__u64 ret = 0;

	bpf_probe_read_kernel(&ret, 8, (char *)ctx + 8 * n);
	return ret;
}

/* one_entry starts a call of func in a program that serves func alone
 * (kprobe_one, fentry_one) and saves its slots in the call for the exit:
 * from the registers a kprobe saw, or the trampoline's context. */
static __always_inline void one_entry(void *ctx, int kprobe)
{
	__u32 func = trawl_func(), d;
	struct shadow *s;
	const struct plan *p;
	struct call *c;
	/* A kprobe's stack position is its stack pointer, a trampoline's its
	 * context; the track flag is 0 on trampolines, as --track, which
	 * reads arguments with bpf_get_func_arg there, is refused where
	 * fentry_one serves (before 5.17). */
	__u64 sp = kprobe ? ctx_u64(ctx, REG_SP) : (__u64)ctx;

	p = bpf_map_lookup_elem(&plans, &func);
	if (!p || !(c = push(ctx, &s, &d, func, p, sp, kprobe ? KPROBE_ONE : 0)))
		return;
	c->ip = func;
	if (kprobe)
		kprobe_slots(ctx, c->slots, p);
	else
		ctx_slots(ctx, trawl_nr_slots(), c->slots);
	enter(ctx, c, d, p, KPROBE_ONE);
}

SEC("kprobe/trawl_placeholder")
int kprobe_one(void *ctx)
{
	one_entry(ctx, 1);
	return 0;
}

SEC("fentry/trawl_placeholder")
int fentry_one(void *ctx)
{
	one_entry(ctx, 0);
	return 0;
}

SEC("fexit/trawl_placeholder")
int fexit_one(void *ctx)
{
	one_exit(ctx, trawl_func(), ctx_ret(ctx, trawl_nr_slots()));
	return 0;
}

/* follow_fork adds children of traced processes to the pids map. */
SEC("tp_btf/sched_process_fork")
int follow_fork(__u64 *ctx)
{
	struct task_struct *parent = (void *)ctx[0], *child = (void *)ctx[1];
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (filter_pids && bpf_map_lookup_elem(&pids, &ptgid) &&
	    bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY))
		count(CNT_MISS_PIDS);
	return 0;
}

/* forget_exit removes a traced process from the pids map when its last
 * thread exits, so the map holds live processes only and a recycled pid
 * is never traced by mistake. The tracepoint fires after do_exit counted
 * the thread out of signal->live. */
SEC("tp_btf/sched_process_exit")
int forget_exit(__u64 *ctx)
{
	struct task_struct *t = (void *)ctx[0];
	__u32 tgid = t->tgid;

	if (filter_pids && !t->signal->live.counter)
		bpf_map_delete_elem(&pids, &tgid);
	return 0;
}

/* Session programs run once at entry and once at exit of each call, and
 * the two runs share an 8-byte cookie per call: kprobe.session (6.10) and
 * fsession (7.0; fsession.multi on the tracing_multi link, 7.2 x86-64).
 * Calls still live on the task's shadow stack, a call being too big for
 * the cookie; the cookie pairs entry and exit exactly: the entry
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

/* session_entry pushes a call for func and notes its depth in the
 * session cookie (kprobe: of a kprobe.session program). It returns the
 * call, with its depth in *dp, or 0 with *skip set when the exit run is
 * not needed. */
static __always_inline struct call *session_entry(void *ctx, __u32 func, const struct plan *p, __u32 *dp, int *skip, int kprobe)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	struct shadow *s = 0;
	struct call *c;

	*skip = 1;
	if (!cookie)
		return 0;
	*cookie = 0;
	c = push(ctx, &s, dp, func, p, kprobe ? ctx_u64(ctx, REG_SP) : (__u64)ctx, kprobe);
	if (!s)
		return 0; /* filtered, or no task storage: nothing to pop */
	*cookie = s->depth; /* depth + 1 of this call */
	*skip = 0;
	return c;
}

/* session_exit pops the call, and calls above it whose exit was missed,
 * and sends it. */
static __always_inline void session_exit(void *ctx, __u64 ret, int kprobe)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	struct shadow *s;
	__u32 d;

	if (!cookie || !*cookie)
		return;
	s = get_shadow(0);
	if (!s)
		return;
	d = *cookie - 1;
	if (s->depth > d + 1)
		count(CNT_MISS_EXIT);
	s->depth = d;
	shut_gate(s);
	if (d < MAX_DEPTH)
		finish(ctx, &s->calls[slot_of(d)], d, ret, kprobe);
}

/* The lean --stats path of the session backends. When calls are only
 * counted, and nothing but the duration and the error decides which
 * (no --entry, --stack, --show or --filter expression), the entry keeps
 * the function and its start time in the session cookie, and the exit
 * counts the call: no shadow stack, no second lookup of the function.
 * The time keeps its low LEAN_TS_BITS bits (4.9 hours): a duration is
 * their difference, exact for any call shorter than that. */
#define LEAN_TS_BITS 44
#define LEAN_TS_MASK ((1ULL << LEAN_TS_BITS) - 1)
#define lean_stats (aggregate && !entry_gate && !error_chains && !filter_at && !want_stack && !show_on)

/* lean_entry notes a call of func in the session cookie. It returns
 * whether the exit run can be skipped. */
static __always_inline int lean_entry(void *ctx, __u32 func)
{
	__u64 *cookie = bpf_session_cookie(ctx);

	if (!cookie)
		return 1;
	*cookie = 0;
	if (armed != ARM_ON)
		return 1;
	if (!wanted()) {
		count(CNT_FILTERED);
		return 1;
	}
	*cookie = (__u64)(func + 1) << LEAN_TS_BITS | (bpf_ktime_get_ns() & LEAN_TS_MASK);
	return 0;
}

/* lean_exit counts the call whose entry lean_entry noted. */
static __always_inline void lean_exit(void *ctx, __u64 ret)
{
	__u64 *cookie = bpf_session_cookie(ctx);
	__u64 noted, dur;
	__u32 func;

	if (!cookie || !(noted = *cookie))
		return;
	dur = (bpf_ktime_get_ns() - noted) & LEAN_TS_MASK;
	func = (noted >> LEAN_TS_BITS) - 1;
	count(CNT_CALLS);
	if (exit_passes(func, dur, ret))
		tally(func, 1, dur, ret);
}

/* Loaded through internal/kernel/rawbpf as fsession (7.0) or
 * fsession.multi (7.2, x86-64): cilium/ebpf v0.22 cannot attach either. */
/* fsession_call traces a call of plan index func at its entry. */
static __always_inline void fsession_call(void *ctx, __u32 func)
{
	const struct plan *p;
	struct call *c;
	__u32 d;
	int skip;

	p = bpf_map_lookup_elem(&plans, &func);
	if (p && (c = session_entry(ctx, func, p, &d, &skip, 0)))
		enter(ctx, c, d, p, 0);
}

static APART int fsession_call_apart(void *ctx, __u32 func)
{
	fsession_call(ctx, func);
	return 0;
}

/* fsession_return ends a call at its exit. */
static APART int fsession_return(void *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	session_exit(ctx, ret, 0);
	return 0;
}

SEC("fsession/trawl_placeholder")
int fsession_capture(void *ctx)
{
	__u64 ret = 0, cookie;

	if (armed == ARM_OFF)
		return 0;
	if (bpf_session_is_return(ctx)) {
		if (lean_stats) {
			bpf_get_func_ret(ctx, &ret);
			lean_exit(ctx, ret);
			return 0;
		}
		if (entry_gate && !open_gates)
			return 0; /* outside every entry call: see outside_exit */
		return fsession_return(ctx);
	}
	if (lean_stats) {
		lean_entry(ctx, bpf_get_attach_cookie(ctx));
		return 0;
	}
	/* A call left out keeps its session cookie 0, as the trampoline
	 * clears it: its exit, if a gate opens meanwhile, pops nothing. */
	cookie = bpf_get_attach_cookie(ctx);
	if (gated_out(cookie))
		return 0;
	if (!want_stack)
		return fsession_call_apart(ctx, cookie);
	fsession_call(ctx, cookie);
	return 0;
}

SEC("kprobe.session")
int kprobe_session_capture(void *ctx)
{
	const struct plan *p;
	struct call *c;
	__u32 func, d;
	int skip;

	if (bpf_session_is_return(ctx)) {
		if (lean_stats)
			lean_exit(ctx, ctx_u64(ctx, REG_RET));
		else
			session_exit(ctx, ctx_u64(ctx, REG_RET), 1);
		return 0;
	}
	if (armed != ARM_ON)
		return 1; /* and skip the exit */
	if (lean_stats)
		return lean_entry(ctx, func_at(ctx, bpf_get_func_ip(ctx)));
	p = kprobe_plan(ctx, bpf_get_func_ip(ctx), &func);
	if (!p)
		return 1;
	c = session_entry(ctx, func, p, &d, &skip, 1);
	if (!c)
		return skip;
	kprobe_slots(ctx, c->slots, p);
	enter(ctx, c, d, p, 1);
	return 0;
}
