// SPDX-License-Identifier: Apache-2.0

// Package render writes decoded calls as text lines, call trees, JSON lines,
// Perfetto traces (Perfetto's protobuf format or the Chrome trace event
// format), latency statistics, folded stacks for flame graphs and an HTML
// page, and reads JSON lines back into calls.
//
// The capture pipeline pairs each call's entry and exit, decodes them into a
// call.Call and hands it to one Renderer from a single goroutine.
package render

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/call"
)

// Renderer writes calls somewhere. Call must not retain c or c.Args after
// it returns, but may retain the decoded Values' Fields, which the decoder
// never reuses. Flush writes out what is complete and buffered, so output
// streams as calls arrive; Close writes the rest and flushes it; neither
// closes the underlying writer.
type Renderer interface {
	Call(c *call.Call) error
	Flush() error
	Close() error
}

// Options are common to the renderers.
type Options struct {
	// Color adds ANSI colours; set it when writing to a terminal (see
	// IsTerminal).
	Color bool
	// WallOffset is added to a call.Call's TS to give Unix time in ns (see
	// WallOffset). When 0, times are shown as seconds of the kernel clock.
	WallOffset int64
	// Location is the time zone of wall-clock times; nil means time.Local.
	Location *time.Location
}

// WallOffset returns the offset from CLOCK_MONOTONIC, the clock of
// call.Call's TS, to Unix time, for Options.WallOffset.
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
