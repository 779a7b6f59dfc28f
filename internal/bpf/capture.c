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
 * when every FEATURE constant it would set is 0 (lean.go). */
#ifdef TRAWL_LEAN
#define FEATURE(decl) static const decl
/* Without the --entry gate, the trampoline programs have no short way to
 * keep apart from the tracing: trace inline (see fentry_call_apart). */
#define APART __always_inline
#else
#define FEATURE(decl) volatile const decl
#define APART __noinline
#endif

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
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

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

/* The features, each in its header and after what it uses, then the
 * programs by attach type. The programs keep this order: clang inlines
 * functions in the order it meets them, and another order lays out the
 * stacks of some programs otherwise. */
#include "task.h"       /* the task's shadow storage, ids and name */
#include "iptable.h"    /* kprobes: the function of an address */
#include "taskfilter.h" /* --pid (following forks), --comm, --cgroup */
#include "filter.h"     /* --filter, --show, --min-duration, --errors, --errno */
#include "path.h"       /* captures: file paths */
#include "memory.h"     /* captures: the memory behind arguments */
#include "aggregate.h"  /* --stats */
#include "track.h"      /* --track */
#include "gate.h"       /* --entry */
#include "shadow.h"     /* calls in flight: push, pop, frames */
#include "stack.h"      /* --stack */
#include "chain.h"      /* --entry --errors: error chains */
#include "args.h"       /* argument slots, by kind of program */
#include "call.h"       /* a call's way: enter, finish, emit, send */
#include "session.h"    /* what the session programs share */
#include "kprobe.h"     /* kprobe.multi, kretprobe.multi, kprobe.session */
#include "trampoline.h" /* fentry, fexit, fsession, fsession.multi */
#include "one.h"        /* a copy per function: kprobe, kretprobe, fentry, fexit */

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
	enum stack_mark stack_mark;
	struct tracked tracked;
};
const struct shared *shared __attribute__((unused));
