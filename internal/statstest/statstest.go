// SPDX-License-Identifier: Apache-2.0

// Package statstest makes up the per-function aggregates the exporters'
// tests (metrics, otlp) feed their sources.
package statstest

import (
	"syscall"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
)

// Function returns the aggregates of function name in module ("" for the
// kernel) called once for each of durations (ns), errors of them failing
// with ENOENT.
func Function(name, module string, errors uint64, durations ...uint64) trawl.FunctionStats {
	var h call.Histogram
	var total uint64
	for _, d := range durations {
		h.Record(d)
		total += d
	}
	f := trawl.FunctionStats{Func: name, Module: module, Calls: uint64(len(durations)), Errors: errors, Total: total, Latency: h, Errnos: map[int]uint64{}}
	if errors > 0 {
		f.Errnos[int(syscall.ENOENT)] = errors
	}
	return f
}

// Source is a trace's aggregates, made up: what the exporters read from a
// session. FunctionStats fails with Err when it is set.
type Source struct {
	Funcs  []trawl.FunctionStats
	Totals trawl.Stats
	Err    error
}

// FunctionStats returns s.Funcs, or s.Err.
func (s *Source) FunctionStats() ([]trawl.FunctionStats, error) { return s.Funcs, s.Err }

// Stats returns s.Totals.
func (s *Source) Stats() (trawl.Stats, error) { return s.Totals, nil }
