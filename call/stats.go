// SPDX-License-Identifier: Apache-2.0

package call

// FunctionStats are one function's figures since the trace began.
type FunctionStats struct {
	Func   string
	Module string // "" for vmlinux
	// Calls counts the calls that ended, Errors those of them that
	// returned an error, Errnos those by errno (0 for a NULL pointer).
	Calls, Errors uint64
	Errnos        map[int]uint64
	// Total is the sum of the durations (ns) of the calls whose entry was
	// seen, and Latency their histogram.
	Total   uint64
	Latency Histogram
	// Event says the figures are a tracepoint's (Func "tp:SUBSYSTEM:EVENT"):
	// Calls counts its events, which have no duration nor error, so
	// Latency is empty.
	Event bool
}

// StackCount is how many calls of a function ended under one kernel stack
// and one user stack, counted in the kernel.
type StackCount struct {
	Func   string
	Module string // "" for vmlinux
	// Stack is the kernel stack at the calls' entry and UStack the user
	// stack of their task, innermost first, framed as Call.Stack and
	// Call.UStack are; nil when not taken, and UStack in a kernel thread.
	// A stack the kernel had no room for is the one frame LostStack;
	// calls the kernel could not count by stack have the one kernel frame
	// UncountedStack.
	Stack, UStack []string
	// PID is the process whose user stack UStack is, 0 without one.
	PID uint32
	// Calls counts the calls.
	Calls uint64
}

// Frames of StackCount that stand for stacks the kernel could not keep.
const (
	// LostStack is a stack its map had no room for: its frames are lost.
	LostStack = "[stack-lost]"
	// UncountedStack stands for both stacks of the calls that the map of
	// counts by stack had no room for.
	UncountedStack = "[stack-not-counted]"
)
