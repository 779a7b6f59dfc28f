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
