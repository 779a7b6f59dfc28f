// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"github.com/trawl-dev/trawl/internal/bpf"
)

// Stats are the session's counters. Every call the program saw end is
// accounted for:
//
//	Calls = Received + Counted + Drops + FilteredExit + calls not yet read
//
// and Received = calls returned by Read + Discarded + Malformed.
type Stats struct {
	// Calls counts the traced calls whose exit the program saw, sent or
	// not; Drops those the ring buffer had no room for.
	Calls, Drops uint64
	// Received counts the calls read from the ring buffer, Discarded
	// those of them dropped unread by Discard.
	Received, Discarded uint64
	// Malformed counts the records Read skipped, received but not
	// decoded: too short for their header or data, or of a function
	// the session does not trace. Read goes on with the next record.
	Malformed uint64
	// Counted counts the calls an aggregating session (Config.Aggregate)
	// counted in the kernel instead of sending them.
	Counted uint64
	// MissStorage counts entries without task storage, MissDepth calls
	// nested deeper than the shadow stack, MissEntry exits without their
	// entry (sent flagged exit-only), MissExit entries whose exit never
	// came, MissFrame calls sent without their captured memory (their
	// frame was evicted from the frames map), MissPIDs children of traced
	// processes not followed because the pids map was full.
	// MissErrno counts errors of an aggregating session not counted by
	// errno, the map of errnos being full.
	MissStorage, MissDepth, MissEntry, MissExit, MissFrame, MissPIDs, MissErrno uint64
	// Filtered counts entries dropped in the kernel by the task filters
	// (pid, comm, cgroup), FilteredExpr entries dropped by an
	// arguments-only --filter expression, FilteredExit calls dropped at
	// exit by --min-duration, --errors or a --filter using ret.
	Filtered, FilteredExpr, FilteredExit uint64
	// CookieLookups counts kprobe program runs that found their function
	// by the attach cookie, the address table lacking its address: slower,
	// and expected to stay 0.
	CookieLookups uint64
	// OutsideEntry counts, with Config.Entries, the calls left out in the
	// kernel because their task was inside no entry call.
	OutsideEntry uint64
	// Chains counts the error chains sent (with Entries and Errors), and
	// MissChain the calls of chains lost, evicted from the kernel's chain
	// buffer before their entry call ended.
	Chains, MissChain uint64
	// MissStack counts, with Config.Stack, the calls whose kernel stack
	// the kernel's stack map could not take.
	MissStack uint64
	// MissUserStack counts, with Config.UserStack, the calls whose user
	// stack the kernel's map of user stacks could not take, and
	// ShortUserStack the distinct user stacks read (each once per
	// process) whose frame chain ended before the function a thread
	// starts in (code built without frame pointers), shown as far as
	// they go.
	MissUserStack, ShortUserStack uint64
	// MissStackCount counts, with Config.Aggregate and a stack, the calls
	// the kernel's map of stack counts had no room for
	// (Config.StackCounts): StackCounts gives them under the frame
	// call.UncountedStack.
	MissStackCount uint64
	// MissFigures counts, with Config.Aggregate, the calls counted
	// without their duration and error, the kernel's map of per-function
	// figures refusing their function's first entry (its bucket busy in
	// a program the call's interrupted).
	MissFigures uint64
	// StaleGates counts, with Config.Entries, the entry calls whose exit
	// was missed (their calls counted in MissExit): a later call of the
	// same entry function, not nested in it, shut their task's gate.
	StaleGates uint64
	// With Config.Track: Journeys counts the journeys started, Tracked
	// the objects tracked (the journeys' first ones and the pointers
	// their calls returned), TrackFreed those a free function freed,
	// TrackExpired those no call received within Config.TrackTimeout,
	// TrackEvicted those the kernel forgot, its map of them being full
	// (exact once the session is closed), and Untracked the entries left
	// out because they received no tracked object.
	Journeys, Tracked, TrackFreed, TrackExpired, TrackEvicted, Untracked uint64
	RecursionMisses                                                      map[string]uint64
	// Attached counts the functions attached; Skipped lists those left
	// out (for the kprobe backends, addresses), by reason.
	Attached int
	Skipped  Skips
}

// statsOf makes the Stats of a session's counts.
func statsOf(c counts) Stats {
	st := Stats{
		Received:        c.Received,
		Discarded:       c.Discarded,
		Malformed:       c.Malformed,
		Counted:         c.Counted,
		TrackEvicted:    c.TrackEvicted,
		ShortUserStack:  c.ShortUserStack,
		Attached:        c.Attached,
		Skipped:         Skips(c.Skipped),
		RecursionMisses: c.RecursionMisses,
	}
	for counter, field := range counterFields {
		*field(&st) = c.Counters[counter]
	}
	return st
}

// counterFields gives the Stats field of each of the capture program's
// counters (enum counter in capture.h). TestStatsHasEveryCounter checks
// that every counter has one.
var counterFields = [bpf.CaptureCounterCNT_MAX]func(*Stats) *uint64{
	bpf.CaptureCounterCNT_CALLS:            func(s *Stats) *uint64 { return &s.Calls },
	bpf.CaptureCounterCNT_DROPS:            func(s *Stats) *uint64 { return &s.Drops },
	bpf.CaptureCounterCNT_MISS_STORAGE:     func(s *Stats) *uint64 { return &s.MissStorage },
	bpf.CaptureCounterCNT_MISS_DEPTH:       func(s *Stats) *uint64 { return &s.MissDepth },
	bpf.CaptureCounterCNT_MISS_ENTRY:       func(s *Stats) *uint64 { return &s.MissEntry },
	bpf.CaptureCounterCNT_MISS_EXIT:        func(s *Stats) *uint64 { return &s.MissExit },
	bpf.CaptureCounterCNT_FILTERED:         func(s *Stats) *uint64 { return &s.Filtered },
	bpf.CaptureCounterCNT_FILTERED_EXPR:    func(s *Stats) *uint64 { return &s.FilteredExpr },
	bpf.CaptureCounterCNT_FILTERED_EXIT:    func(s *Stats) *uint64 { return &s.FilteredExit },
	bpf.CaptureCounterCNT_COOKIE_LOOKUPS:   func(s *Stats) *uint64 { return &s.CookieLookups },
	bpf.CaptureCounterCNT_MISS_FRAME:       func(s *Stats) *uint64 { return &s.MissFrame },
	bpf.CaptureCounterCNT_MISS_PIDS:        func(s *Stats) *uint64 { return &s.MissPIDs },
	bpf.CaptureCounterCNT_MISS_ERRNO:       func(s *Stats) *uint64 { return &s.MissErrno },
	bpf.CaptureCounterCNT_OUTSIDE_ENTRY:    func(s *Stats) *uint64 { return &s.OutsideEntry },
	bpf.CaptureCounterCNT_CHAINS:           func(s *Stats) *uint64 { return &s.Chains },
	bpf.CaptureCounterCNT_MISS_CHAIN:       func(s *Stats) *uint64 { return &s.MissChain },
	bpf.CaptureCounterCNT_MISS_STACK:       func(s *Stats) *uint64 { return &s.MissStack },
	bpf.CaptureCounterCNT_MISS_USTACK:      func(s *Stats) *uint64 { return &s.MissUserStack },
	bpf.CaptureCounterCNT_STALE_GATES:      func(s *Stats) *uint64 { return &s.StaleGates },
	bpf.CaptureCounterCNT_JOURNEYS:         func(s *Stats) *uint64 { return &s.Journeys },
	bpf.CaptureCounterCNT_TRACKED:          func(s *Stats) *uint64 { return &s.Tracked },
	bpf.CaptureCounterCNT_TRACK_FREED:      func(s *Stats) *uint64 { return &s.TrackFreed },
	bpf.CaptureCounterCNT_TRACK_EXPIRED:    func(s *Stats) *uint64 { return &s.TrackExpired },
	bpf.CaptureCounterCNT_UNTRACKED:        func(s *Stats) *uint64 { return &s.Untracked },
	bpf.CaptureCounterCNT_MISS_STACK_COUNT: func(s *Stats) *uint64 { return &s.MissStackCount },
	bpf.CaptureCounterCNT_MISS_FIGURES:     func(s *Stats) *uint64 { return &s.MissFigures },
}
