/* SPDX-License-Identifier: GPL-2.0 */
/* The current task, part of capture.c: its shadow stack (task storage),
 * its ids and its name, each with the older means of kernels before 5.11
 * (legacy.go). */
#ifndef TRAWL_TASK_H
#define TRAWL_TASK_H

/* Kernels before 5.11 have neither task storage nor
 * bpf_get_current_task_btf. The loader (legacy.go) then
 * sets these, and the verifier prunes the branches the kernel cannot run:
 * - shadow_by_tid: the shadows map is an LRU hash keyed by thread id,
 *   bounded by its size; a shadow it cannot make is counted as
 *   CNT_MISS_STORAGE, and one it evicted (a thread quiet for long while
 *   others trace) shows as exits without their entry.
 * - task_by_helpers: the task's ids and name come from the helpers
 *   (bpf_get_current_pid_tgid, bpf_get_current_comm). */
FEATURE(__u32 shadow_by_tid) = 0;
FEATURE(__u32 task_by_helpers) = 0;

/* trawl's PID namespace (the device and inode of /proc/self/ns/pid), set
 * by the loader when it is not the initial one (pidns.go): the ids a
 * record carries are then the task's in that namespace, as the user of
 * trawl sees them, and 0 for a task whose own namespace is another (the
 * helper, 5.7+, translates into the task's active namespace only). */
FEATURE(__u64 pidns_dev) = 0;
FEATURE(__u64 pidns_ino) = 0;

/* ns_ids fills ns with the current task's ids in trawl's PID namespace,
 * and zeroes them and returns non-zero when the task is outside it. */
static __always_inline long ns_ids(struct bpf_pidns_info *ns)
{
	return bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, ns, sizeof(*ns));
}

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

/* current_tgid returns the current task's process id, as who does. */
static __always_inline __u32 current_tgid(void)
{
	struct bpf_pidns_info ns;

	if (!pidns_ino)
		return bpf_get_current_pid_tgid() >> 32;
	ns_ids(&ns);
	return ns.tgid;
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
	} else {
		t = bpf_get_current_task_btf();
		r->tgid = t->tgid;
		r->pid = t->pid;
		read_comm(t, (__u64 *)r->comm);
	}
	if (pidns_ino) {
		struct bpf_pidns_info ns;

		ns_ids(&ns);
		r->tgid = ns.tgid;
		r->pid = ns.pid;
	}
}

#endif
