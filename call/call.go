// SPDX-License-Identifier: Apache-2.0

// Package call is trawl's data model: a traced call, decoded (Call), the
// values of its arguments and return (Value, Kind), and the figures of
// the functions a trace counts instead of sending their calls
// (FunctionStats, Histogram).
//
// A trawl session fills them: its decoder makes a Call of each call's
// entry and exit, and an aggregating session reads the kernel's counters
// into FunctionStats. Package render writes them out; packages metrics
// and otlp export them to Prometheus and OpenTelemetry. The model imports
// no other part of trawl.
package call

// Call is one traced call after entry/exit pairing and decoding.
type Call struct {
	// TS is when the call started, in ns of the kernel clock the BPF program
	// reads (bpf_ktime_get_ns: CLOCK_MONOTONIC). For ExitOnly calls it is
	// the exit time.
	TS uint64
	// Duration is the time from entry to exit in ns; 0 when unknown.
	Duration uint64
	CPU      uint32
	PID      uint32 // the thread group id
	TID      uint32
	Comm     string
	Func     string
	Module   string // "" for vmlinux
	// Args are the decoded arguments, Name set to the parameter name.
	Args []Value
	// Show are the values of the --show expressions (trawl.Config Show), Name
	// set to the expression, in their order; KindUnknown where the
	// memory could not be read.
	Show []Value
	// Ret is the decoded return value; KindNone for void functions and
	// calls whose exit was not seen.
	Ret Value
	// Depth is the number of traced calls in progress on the same task
	// when this one started: 0 for the outermost. The Tree renderer needs it.
	Depth int
	Flags CallFlags
	// Chain numbers the error chain the call is part of (with
	// trawl.Config Entries and Errors): the calls of one failed entry call
	// that returned an error, from the entry down to the Origin. 0 outside
	// chains.
	Chain uint32
	// Track is the journey of the call with trawl.Config Track: the
	// address of the first object of the journey, which the call
	// received (or an object cloned from it); 0 without Track.
	Track uint64
	// Stack is the kernel stack at the call's entry (with trawl.Config
	// Stack), innermost first, each frame "symbol+0xoffset [module]" or
	// "symbol+0xoffset" in vmlinux; nil when not taken. The slice is shared
	// by the calls of the same stack: do not modify it.
	Stack []string
	// UStack is the user stack of the call's task (with trawl.Config
	// UserStack), innermost first, each frame "symbol+0xoffset [binary]",
	// "binary+0xoffset" where no symbol fits, or "0xaddress" outside
	// every mapping known; nil when not taken. Shared as Stack is.
	UStack []string
}

// CallFlags qualify a Call.
type CallFlags uint8

const (
	// EntryOnly marks a call whose exit was not seen (the capture ended or
	// the exit event was lost): no Ret, no Duration.
	EntryOnly CallFlags = 1 << iota
	// ExitOnly marks a call whose entry was not seen: no Args, and TS is the
	// exit time.
	ExitOnly
	// Missed marks a call around which events of its task were lost, so its
	// Depth or pairing may be wrong.
	Missed
	// Origin marks the innermost call of an error chain, where the error
	// appeared: no call it made on the chain returned an error.
	Origin
	// TrackEnd marks the call that freed the last object its journey
	// tracked (Call.Track): the journey ends with it.
	TrackEnd
	// Event marks a tracepoint's event (Func is "tp:SUBSYSTEM:EVENT"): its
	// Args are the tracepoint's, and it has no Duration and no Ret.
	Event
)
