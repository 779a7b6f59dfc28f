/* SPDX-License-Identifier: GPL-2.0 */
/* The task filters, part of capture.c: --pid, with the children it
 * follows, --comm and --cgroup (open.go, filters.go). */
#ifndef TRAWL_TASKFILTER_H
#define TRAWL_TASKFILTER_H

/* Set by the loader. */
FEATURE(__u32 filter_pids) = 0;   /* only tasks in the pids (or nspids) map */
FEATURE(char filter_comm[16]) = {}; /* only this comm, if set */
FEATURE(__u64 filter_cgroup) = 0; /* only tasks in this cgroup (v2 id) */
FEATURE(__u32 filter_cgroup_level) = 0; /* its level: 0 for the root */
FEATURE(__u32 filter_cgroup_exact) = 0; /* not in its descendants */

/* pids holds the traced processes by their tgid in the initial PID
 * namespace, which the programs see. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

/* nspids holds the --pid processes not yet seen, by their tgid in trawl's
 * PID namespace (pidns_ino in task.h), when trawl runs in one: user space
 * cannot tell their tgid in the initial namespace. A process moves to
 * pids when it is first seen (admit), before its tgid can be recycled. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} nspids SEC(".maps");

/* admit moves the current process, whose tgid in the initial namespace is
 * tgid, from nspids to pids if it is there, and says whether it did. */
static __always_inline int admit(__u32 tgid)
{
	struct bpf_pidns_info ns;
	__u8 one = 1;

	if (!pidns_ino || ns_ids(&ns) || !bpf_map_lookup_elem(&nspids, &ns.tgid))
		return 0;
	if (bpf_map_update_elem(&pids, &tgid, &one, BPF_ANY)) {
		count(CNT_MISS_PIDS);
		return 0;
	}
	bpf_map_delete_elem(&nspids, &ns.tgid);
	return 1;
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
		if (!bpf_map_lookup_elem(&pids, &tgid) && !admit(tgid))
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

/* follow adds the child ctgid of a traced process ptgid, the current
 * one, to the pids map. */
static __always_inline void follow(__u32 ptgid, __u32 ctgid)
{
	__u8 one = 1;

	if (filter_pids && (bpf_map_lookup_elem(&pids, &ptgid) || admit(ptgid)) &&
	    bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY))
		count(CNT_MISS_PIDS);
}

/* forget removes the process tgid from the pids (and nspids) map when
 * its last thread exits (live, the threads not yet exiting, is 0), so the
 * maps hold live processes only and a recycled pid is never traced by
 * mistake. */
static __always_inline void forget(__u32 tgid, int live)
{
	struct bpf_pidns_info ns;

	if (!filter_pids || live)
		return;
	bpf_map_delete_elem(&pids, &tgid);
	/* A --pid process never seen: the exiting task is the current one. */
	if (pidns_ino && !ns_ids(&ns))
		bpf_map_delete_elem(&nspids, &ns.tgid);
}

/* follow_fork follows the children of traced processes. */
SEC("tp_btf/sched_process_fork")
int follow_fork(__u64 *ctx)
{
	struct task_struct *parent = (void *)ctx[0], *child = (void *)ctx[1];

	follow(parent->tgid, child->tgid);
	return 0;
}

/* forget_exit forgets traced processes that exit. The tracepoint fires
 * after do_exit counted the thread out of signal->live. */
SEC("tp_btf/sched_process_exit")
int forget_exit(__u64 *ctx)
{
	struct task_struct *t = (void *)ctx[0];

	forget(t->tgid, t->signal->live.counter);
	return 0;
}

/* follow_fork_raw and forget_exit_raw are follow_fork and forget_exit as
 * raw tracepoints, for a kernel without BTF of its own (trawl reads its
 * BTF from a file), which cannot attach tp_btf programs: they read the
 * tasks with bpf_probe_read_kernel, relocated by CO-RE. */
SEC("raw_tp/sched_process_fork")
int follow_fork_raw(__u64 *ctx)
{
	struct task_struct *parent = (void *)ctx[0], *child = (void *)ctx[1];
	int ptgid = 0, ctgid = 0;

	bpf_probe_read_kernel(&ptgid, sizeof(ptgid), &parent->tgid);
	bpf_probe_read_kernel(&ctgid, sizeof(ctgid), &child->tgid);
	follow(ptgid, ctgid);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int forget_exit_raw(__u64 *ctx)
{
	struct task_struct *t = (void *)ctx[0];
	struct signal_struct *sig = 0;
	int tgid = 0, live = 0;

	bpf_probe_read_kernel(&tgid, sizeof(tgid), &t->tgid);
	bpf_probe_read_kernel(&sig, sizeof(sig), &t->signal);
	bpf_probe_read_kernel(&live, sizeof(live), &sig->live.counter);
	forget(tgid, live);
	return 0;
}

#endif
