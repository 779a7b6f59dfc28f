// SPDX-License-Identifier: Apache-2.0

// Package render writes decoded calls as text lines, call trees, JSON lines,
// Perfetto traces (Perfetto's protobuf format or the Chrome trace event
// format) and latency statistics.
//
// The capture pipeline pairs each call's entry and exit, decodes them into a
// Call and hands the Call to one Renderer from a single goroutine.
package render

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

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
	// Show are the values of the --show expressions (Config.Show), Name
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
)

// Renderer writes calls somewhere. Call must not retain c or c.Args after
// it returns, but may retain the decoded Values' Fields, which the decoder
// never reuses. Flush writes out what is complete and buffered, so output
// streams as calls arrive; Close writes the rest and flushes it; neither
// closes the underlying writer.
type Renderer interface {
	Call(c *Call) error
	Flush() error
	Close() error
}

// Options are common to the renderers.
type Options struct {
	// Color adds ANSI colours; set it when writing to a terminal (see
	// IsTerminal).
	Color bool
	// WallOffset is added to Call.TS to give Unix time in ns (see
	// WallOffset). When 0, times are shown as seconds of the kernel clock.
	WallOffset int64
	// Location is the time zone of wall-clock times; nil means time.Local.
	Location *time.Location
}

// WallOffset returns the offset from CLOCK_MONOTONIC, the clock of
// Call.TS, to Unix time, for Options.WallOffset.
func WallOffset() (int64, error) {
	var mono, real unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return 0, fmt.Errorf("read monotonic clock: %w", err)
	}
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &real); err != nil {
		return 0, fmt.Errorf("read real-time clock: %w", err)
	}
	return real.Nano() - mono.Nano(), nil
}

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}
