/* SPDX-License-Identifier: GPL-2.0 */
/* Shared layout of trawl's capture program and its Go loader. Every size
 * and offset here is mirrored by the Go structs bpf2go generates. The
 * constants the loader uses are enumerators, not macros, which do not
 * reach the object: struct shared (capture.c) puts their enums in the
 * object's BTF, from which bpf2go generates them for Go. */
#ifndef TRAWL_CAPTURE_H
#define TRAWL_CAPTURE_H

enum limit {
	MAX_SLOTS = 12,    /* argument slots: x86-64 trampolines take 12 */
	MAX_CAPS = 12,     /* pointer arguments whose memory is copied */
	MAX_DEPTH = 16,    /* nested traced calls kept per task */
	MAX_DATA = 1024,   /* bytes copied behind pointers, per call */
	MAX_CAP = 512,     /* bytes copied behind one pointer (power of 2) */
	IP_MAX_PROBES = 8, /* address table slots tried from an address's hash */
	MAX_STACK = 64,    /* frames of a kernel stack (--stack) */
	MAX_STACKS = 16384, /* stacks the stack map holds; ids fit a call's __u16 */
	PATH_STEPS = 32,   /* dentries and mount points a file's path goes up (CAP_PATH) */
};

/* What a capture copies. */
enum cap_kind {
	CAP_MEM = 1, /* size bytes of memory */
	CAP_STR = 2, /* a NUL-terminated string, at most size bytes */
	/* Sized buffers: as many bytes as slot len_slot says, at most size.
	 * The exit kinds come after every entry kind in a plan's caps. */
	CAP_BUF = 3,      /* at entry */
	CAP_BUF_EXIT = 4, /* at exit (a buffer the function fills) */
	CAP_BUF_RET = 5,  /* at exit, as many bytes as a positive ret, at most the slot's */
	/* --depth: size bytes behind a pointer that capture slot's bytes
	 * hold, at data offset off (see PLAN_DEEP). */
	CAP_DEEP = 6,
	/* The packet of an sk_buff: size bytes at its head pointer, held at
	 * data offset off, plus its network_header, held at net_at; capture
	 * slot holds both (see PLAN_DEEP). */
	CAP_PKT = 7,
	/* A NUL-terminated string, at most size bytes, behind a char * that
	 * capture slot's bytes hold at data offset off (see PLAN_DEEP). */
	CAP_DEEP_STR = 8,
	/* The path of the struct path (a mount and a dentry pointer) that
	 * capture slot's bytes hold at data offset off: its dentries' names
	 * from the last up, at most size bytes (copy_path in path.h; see
	 * PLAN_DEEP). */
	CAP_PATH = 9,
};

struct cap {
	__u8 slot; /* the slot holding the pointer; CAP_DEEP: the capture holding it */
	__u8 kind;
	__u16 size;
	__u8 len_slot; /* sized buffers: the slot holding the length */
	__u8 len_size; /* sized buffers: the length's size in bytes */
	/* CAP_DEEP, CAP_PKT, CAP_DEEP_STR, CAP_PATH: where the pointer is in
	 * the call's data; CAP_MEM: the offset from the pointer to copy from,
	 * 0 but for a window of a struct (a member its view shows, past the
	 * bytes copied from its start; see PLAN_DEEP) */
	__u16 off;
	__u16 net_at; /* CAP_PKT: where the network header's offset is in the data */
};

/* src of a kprobe slot: SRC_STACK set means an offset from the stack
 * pointer at entry, else the index of an argument register. */
enum src_flag {
	SRC_STACK = 0x8000,
};

/* How a function's return value tells an error, for --errors. */
enum err_kind {
	ERR_NONE = 0, /* it cannot: void, unsigned, bool, struct */
	ERR_NEG = 1,  /* a signed integer of ret_size bytes: -4095..-1 */
	ERR_PTR = 2,  /* a pointer: NULL or ERR_PTR(-4095..-1) */
};

/* Flags of a plan. */
enum plan_flag {
	PLAN_REGS_IN_ORDER = 1, /* kprobes: slot i is argument register i, for every slot */
	PLAN_EXIT_CAPS = 2,     /* some captures are made at exit (CAP_BUF_EXIT, CAP_BUF_RET) */
	PLAN_SHOW = 4,          /* trawl_show has --show expressions for the function */
	PLAN_ENTRY = 8,         /* an --entry function: its calls open the gate */
	/* Some captures are CAP_DEEP, CAP_PKT, CAP_DEEP_STR, CAP_PATH or
	 * windows (CAP_MEM from an offset).
	 * Captures of structs and packets (CAP_MEM, CAP_PKT, CAP_DEEP) come
	 * first, and each takes its size in the data even when it is not
	 * read (NULL, or a failed read, flagged in cap_failed), so that their
	 * offsets are known to the loader. */
	PLAN_DEEP = 16,
	/* --track: the function returns a pointer of the tracked type, which
	 * joins the journey of a tracked object it received */
	PLAN_TRACK_RET = 32,
	/* --track: the function frees objects of the tracked type (a free
	 * function of track.go): it ends their tracking */
	PLAN_TRACK_FREE = 64,
	/* --track: the function drops a reference to objects of the type,
	 * which may free them (see track.go): like a free
	 * function, it starts no journey */
	PLAN_TRACK_DROP = 128,
};

/* plan is what the program needs to know about one function. */
struct plan {
	__u8 nr_slots;
	__u8 nr_caps;
	__u8 err_kind;
	__u8 ret_size;
	__u16 flags; /* PLAN_* */
	__u16 src[MAX_SLOTS];
	struct cap caps[MAX_CAPS];
	__u16 track_slots; /* --track: bit i set when slot i has the tracked type */
};

/* The states of the trace, in the armed variable (capture.c). */
enum arm_state {
	ARM_OFF,     /* attaching, or detaching: nothing is traced or sent */
	ARM_ON,      /* tracing */
	ARM_STOPPED, /* stopped: calls in flight end */
};

/* The attach cookie of a trampoline program (fentry, fsession,
 * tracing-multi) is its function's plan index, with bit COOKIE_ENTRY set
 * for an --entry function: a call outside every entry call is known as
 * such before its plan is read. */
enum cookie_bit {
	COOKIE_ENTRY = 32,
};

/* Flags of a record. */
enum rec_flag {
	REC_ENTRY = 1,     /* entry seen: slots and data are valid */
	REC_EXIT = 2,      /* exit seen: ret and exit_ts are valid */
	REC_TRUNCATED = 4, /* the data budget ran out */
	REC_ORIGIN = 8,    /* the innermost call of an error chain: the error appeared there */
	REC_TRACK_END = 16, /* --track: the call freed the last object its journey tracked */
};

/* record is one call as it goes to user space: its header, then data_len
 * bytes of captured memory, cap_len[i] bytes for capture i in order. */
struct record {
	__u64 entry_ts;
	__u64 exit_ts;
	__u64 ret;
	__u64 slots[MAX_SLOTS];
	__u32 func;
	__u32 tgid;
	__u32 pid;
	__u16 cpu;
	__u8 flags;
	__u8 depth;
	char comm[16];
	__u16 cap_len[MAX_CAPS];
	__u16 cap_failed; /* bit i: capture i could not be read */
	__u16 data_len;
	__u32 chain; /* --entry --errors: the error chain's number, 0 outside chains */
	__u32 stack; /* --stack: the id + 1 of its kernel stack in the stacks map, 0 for none */
	__u32 ustack; /* --stack user: the id + 1 of its user stack in the ustacks map, 0 for none */
	__u64 track; /* --track: the journey, the address of its first object; 0 for none */
};

/* A frame is a power of two in size, so the verifier keeps exact bounds
 * on &frames[depth]; its data has room for MAX_DATA + MAX_CAP. */
#define FRAME_SIZE 2048

struct frame {
	struct record rec;
	__u8 data[FRAME_SIZE - sizeof(struct record)];
};

_Static_assert(sizeof(struct frame) == FRAME_SIZE, "frame size");
_Static_assert(FRAME_SIZE - sizeof(struct record) >= MAX_DATA + MAX_CAP, "frame data");

/* call is one call in flight: its function, entry time, slot count and,
 * for the kprobe backends (whose registers are gone at exit), its address
 * and argument slots. Trampolines keep the arguments for the exit, so
 * their calls leave slots unset. */
struct call {
	__u64 entry_ts;
	/* What pairs the exit with this call: the function's address for
	 * kprobes (its id in programs serving one function), the context
	 * for trampolines, which is where the trampoline saved the
	 * arguments, in its frame of this call, for the entry and exit. */
	__u64 ip;
	__u32 func;
	__u8 flags; /* CALL_* */
	__u8 nr_slots;
	__u16 stack; /* as record.stack */
	__u64 slots[MAX_SLOTS];
};

/* Flags of a call. */
#define CALL_FRAMED 1 /* its frame in the frames map holds captures */
#define CALL_DROP 2   /* the entry filter refused it: pop, never send */
#define CALL_ENTRY 4  /* the outermost --entry call in flight: it opened the gate */
#define CALL_TRACKED 8  /* --track: it received a tracked object, or started a journey */
#define CALL_UNWANTED 16 /* --track: the task filters refused it, unless it is tracked */
#define CALL_TRACK_END 32 /* --track: its exit ends its journey, freed inside it */
#define CALL_TRACK_START 64 /* --track: it started its journey, named by its first object */

/* shadow is a task's stack of calls in flight. depth counts calls even
 * past MAX_DEPTH, so exits stay matched when the stack overflows. A call
 * that only has scalar arguments lives here alone, and its exit sends it
 * straight from here; a call that copies memory or runs a --filter
 * expression also has a frame in the frames map. The shadow stays small
 * on purpose: task storage of more than a few KB cannot be allocated on
 * 7.x kernels. */
struct shadow {
	__u32 depth;
	__u32 entry_at; /* --entry: depth + 1 of the call that opened the gate, 0 when shut */
	__u32 chain_top; /* --entry --errors: depth + 1 of the chain's outermost call, 0 for none */
	__u32 origin;    /* the depth of the chain's origin */
	__u32 chain_errno; /* the error number of the chain's calls, 0 for NULL */
	__u32 entry_func;  /* --entry: the function of the call that opened the gate */
	__u64 entry_pos;   /* and its stack position (see stale_gate in gate.h) */
	struct call calls[MAX_DEPTH];
};

_Static_assert(sizeof(struct shadow) <= 2048, "shadow size");

/* ip_func is one entry of the address table, in which kprobe programs
 * find the function of an address (see func_at in iptable.h). */
struct ip_func {
	__u64 ip;
	__u32 func;
	__u32 pad;
};

enum ip_hash {
	IP_HASH_MUL = 0x9E3779B97F4A7C15ULL, /* 2^64 / golden ratio */
};

/* frame_key finds a frame in the frames map: the task and the depth. */
struct frame_key {
	__u32 tid;
	__u32 depth;
};

/* Counters, per CPU. Go names them by bpf2go's CaptureCounter constants
 * and counterFields (stats.go) gives each its Stats field: a new counter
 * needs its entry there, which TestStatsHasEveryCounter checks. */
enum counter {
	CNT_CALLS,        /* exits seen */
	CNT_DROPS,        /* records the ring buffer had no room for */
	CNT_MISS_STORAGE, /* entries without task storage */
	CNT_MISS_DEPTH,   /* calls nested deeper than MAX_DEPTH */
	CNT_MISS_ENTRY,   /* exits without their entry */
	CNT_MISS_EXIT,    /* entries whose exit never came */
	CNT_FILTERED,     /* entries a task filter (pid, comm, cgroup) dropped */
	CNT_FILTERED_EXPR, /* entries an arguments-only --filter dropped */
	CNT_FILTERED_EXIT, /* exits --min-duration, --errors or a --filter using ret dropped */
	CNT_COOKIE_LOOKUPS, /* kprobe runs whose address was not in the table */
	CNT_MISS_FRAME,   /* calls sent without captures: their frame was evicted */
	CNT_MISS_PIDS,    /* children not followed: the pids map was full */
	CNT_MISS_ERRNO,   /* --stats errors not counted by errno: the errnos map was full */
	CNT_OUTSIDE_ENTRY, /* --entry: entries of calls outside every entry call */
	CNT_CHAINS,       /* --entry --errors: error chains sent */
	CNT_MISS_CHAIN,   /* calls of a chain lost: evicted from the chain buffer */
	CNT_MISS_STACK,   /* --stack: entries whose stack the stack map could not take */
	CNT_MISS_USTACK,  /* --stack user: calls whose user stack the ustacks map could not take */
	CNT_STALE_GATES,  /* --entry: gates shut because their entry call's exit was missed */
	CNT_JOURNEYS,     /* --track: journeys started */
	CNT_TRACKED,      /* --track: objects tracked (a journey's first and the pointers it returned) */
	CNT_TRACK_FREED,  /* --track: objects untracked by a free function */
	CNT_TRACK_EXPIRED, /* --track: objects untracked because no traced call received them in time */
	CNT_UNTRACKED,    /* --track: entries left out, receiving no tracked object */
	CNT_MISS_STACK_COUNT, /* --stats --stack: calls the stack_counts map had no room for */
	CNT_MISS_FIGURES, /* --stats: calls counted without duration nor errors: the stats map refused their function */
	CNT_MAX,
};

/* --stats: calls are counted in the kernel, per function, and no record
 * is sent. The durations go into a log-linear histogram with the layout of
 * Go's call.Histogram: exact below HIST_EXACT ns, then 1 << HIST_SUB_BITS
 * buckets per power of two (a percentile is off by at most 12.5%), up to
 * 2^34 ns (17 s); longer calls count in the last bucket. */
enum hist_layout {
	HIST_EXACT = 16,
	HIST_SUB_BITS = 3,
	HIST_BUCKETS = 256,
};

/* func_stats holds one function's figures but its calls (counted in the
 * map call_counts), updated with atomic adds and read by user space
 * through mmap. */
struct func_stats {
	__u64 errors;   /* the calls that returned an error */
	__u64 total_ns; /* the durations of the calls whose entry was seen */
	__u64 max_ns;   /* the longest (set without a lock: a race may keep the other) */
	__u64 hist[HIST_BUCKETS];
	__u64 unstacked; /* --stack: the calls the stack_counts map had no room for */
};

/* stack_count_key holds what an aggregating trace with stacks counts a
 * function's calls by (stack_counts in stack.h). */
struct stack_count_key {
	__u32 func;
	__u32 pid;    /* with a user stack, the process whose addresses it holds; else 0 */
	__u32 stack;  /* the id + 1 of the kernel stack in the stacks map, 0 for none, or STACK_LOST */
	__u32 ustack; /* the same of the user stack in the ustacks map */
};

/* stack_mark marks a stack_count_key's stack that its map could not take
 * (above every id + 1: see MAX_STACKS). */
enum stack_mark {
	STACK_LOST = 0xffff,
};

/* tracked is an object --track follows, in the tracks map by its
 * address: its journey, and when a traced call last received it. */
struct tracked {
	__u64 journey;
	__u64 seen;
};

/* errno_key counts one function's errors with one errno (0: NULL). */
struct errno_key {
	__u32 func;
	__u32 err;
};

#endif
