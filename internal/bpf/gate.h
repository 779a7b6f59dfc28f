/* SPDX-License-Identifier: GPL-2.0 */
/* The --entry gate, part of capture.c: only calls inside an entry call
 * are traced (entry.go). */
#ifndef TRAWL_GATE_H
#define TRAWL_GATE_H

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

#endif
