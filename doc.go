// SPDX-License-Identifier: Apache-2.0

// Package trawl attaches one generic BPF tracing program to many kernel
// functions at once, captures each call's arguments and return value in an
// architecture-neutral way, decodes them with the kernel's BTF and streams
// the calls.
//
// A Config describes a trace; Config.Validate checks what needs no kernel.
// Open selects functions by pattern and starts tracing them; Session.Read
// returns the calls one at a time, as Call values whose arguments are
// Values of a Kind (package call holds this model); package render writes
// calls as text, call trees, JSON lines, Perfetto traces or latency
// statistics. List shows what patterns select without tracing,
// ProbeFeatures what the running kernel offers and ChooseBackend which
// attach mechanism Open would use.
//
// Tracing needs root, or CAP_BPF and CAP_PERFMON (ErrNoPrivileges), and
// a kernel on which one of the backends can attach; where none can, Open
// says in one line the first cause the user can remove (ErrNoBackend).
//
// Behind Open, the package reads as the pipeline: open.go chooses the
// functions and the backend, plans their capture, loads the capture
// program, fills its maps, attaches and arms it; session.go reads and
// decodes the calls and closes the trace.
package trawl
