// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"reflect"
	"strings"
)

// Stats are the session's counters. Every call the program saw end is
// accounted for:
//
//	Calls = Received + Counted + Drops + FilteredExit + calls not yet read
//
// and Received = calls read by Read + Discarded.
type Stats struct {
	// Calls counts the traced calls whose exit the program saw, sent or
	// not; Drops those the ring buffer had no room for.
	Calls, Drops uint64
	// Received counts the calls read from the ring buffer, Discarded
	// those of them dropped unread by Discard.
	Received, Discarded uint64
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

// statsOf makes the Stats of a session's counts. Each of the capture
// program's counters goes into its field (see statsField), so a counter
// added to capture.h needs only its field in Stats.
func statsOf(c counts) Stats {
	st := Stats{
		Received:        c.Received,
		Discarded:       c.Discarded,
		Counted:         c.Counted,
		TrackEvicted:    c.TrackEvicted,
		Attached:        c.Attached,
		Skipped:         Skips(c.Skipped),
		RecursionMisses: c.RecursionMisses,
	}
	fields := reflect.ValueOf(&st).Elem()
	for name, v := range c.Counters {
		if f, ok := statsField(name); ok {
			fields.FieldByIndex(f.Index).SetUint(v)
		}
	}
	return st
}

// statsField finds the Stats field of a counter: the uint64 named as the
// counter without CNT_ and underscores, in any case (MissExit for
// CNT_MISS_EXIT, MissPIDs for CNT_MISS_PIDS). TestStatsHasEveryCounter
// checks every counter has one.
func statsField(counter string) (reflect.StructField, bool) {
	name := strings.ReplaceAll(strings.TrimPrefix(counter, "CNT_"), "_", "")
	f, ok := reflect.TypeFor[Stats]().FieldByNameFunc(func(field string) bool {
		return strings.EqualFold(field, name)
	})
	return f, ok && f.Type.Kind() == reflect.Uint64
}
