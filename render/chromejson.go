// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"io"
	"strconv"

	"github.com/trawl-dev/trawl/call"
)

// idleTID is the base of the thread ids given to the idle tasks, which all
// have tid 0: each CPU's idle task (swapper/N) becomes its own thread.
const idleTID = 1 << 30

// timelineTask returns the process and thread c ran in as the timeline
// shows them: the idle tasks get a thread id of their own per CPU.
func timelineTask(c *call.Call) (pid, tid uint64) {
	if c.TID == 0 {
		return uint64(c.PID), idleTID + uint64(c.CPU)
	}
	return uint64(c.PID), uint64(c.TID)
}

// ChromeJSON writes a Chrome trace event file (JSON object format), which
// the Perfetto UI and chrome://tracing open as a timeline: one complete slice
// ("ph":"X") per call on its process and thread track; process and thread
// names as metadata events; calls whose entry or exit was not seen, and
// tracepoints' events, as instant events ("ph":"i") on the thread's track. Times are in µs of the kernel clock, with ns
// precision.
//
// A slice's args hold the keys of the call's JSON line (see JSON) that the
// event itself does not carry, with the same values (also in
// docs/json-schema.md):
//
//	args   object  argument name -> value; absent for "exit_only"
//	ret    value   return value; absent for void functions and "entry_only"
//	errno  string  error name when ret is a negative error number or error pointer
//	cpu    number  CPU the call ended on
//	chain  number  the error chain of the call (--entry --errors); absent outside chains
//	kind   string  "tracepoint" for a tracepoint's event; absent for a function's call
//	stack  array   the kernel stack at entry (--stack), innermost first; absent without
//	flags  array   of "entry_only", "exit_only", "missed", "origin"; absent when none
//
// The function's arguments are nested in their own object rather than set
// beside ret and cpu: kernel functions have arguments named cpu, flags, ret
// and errno, which would make a duplicate key, and Perfetto keeps only one
// of its values. The Perfetto UI shows the nesting as a tree, args.args.cpu
// apart from args.cpu, and a query of the args table finds an argument
// under the key args.args.NAME.
//
// Slices of one thread nest as the calls did, so the pipeline must give
// real durations; the file is complete only after Close.
type ChromeJSON struct {
	w      *bufio.Writer
	named  map[uint64]bool // pid<<32|tid whose name was written
	events int
	buf    []byte
}

// NewChromeJSON returns a ChromeJSON renderer writing to w.
func NewChromeJSON(w io.Writer) *ChromeJSON {
	return &ChromeJSON{w: bufio.NewWriterSize(w, 64<<10), named: map[uint64]bool{}}
}

// Call writes c as a slice, after name metadata for a new process or thread.
func (p *ChromeJSON) Call(c *call.Call) error {
	pid, tid := timelineTask(c)
	b := p.buf[:0]
	if !p.named[pid<<32] {
		p.named[pid<<32] = true
		b = p.appendName(b, "process_name", pid, pid, c.Comm)
	}
	if !p.named[pid<<32|tid] {
		p.named[pid<<32|tid] = true
		b = p.appendName(b, "thread_name", pid, tid, c.Comm)
	}
	b = p.appendSep(b)
	b = append(b, `{"name":`...)
	b = appendJSONString(b, c.Func)
	b = append(b, `,"cat":`...)
	if c.Module != "" {
		b = appendJSONString(b, c.Module)
	} else {
		b = append(b, `"vmlinux"`...)
	}
	if c.Flags&(call.EntryOnly|call.ExitOnly|call.Event) != 0 {
		b = append(b, `,"ph":"i","s":"t"`...)
	} else {
		b = append(b, `,"ph":"X","dur":`...)
		b = appendMicros(b, c.Duration)
	}
	b = append(b, `,"ts":`...)
	b = appendMicros(b, c.TS)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, pid, 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, tid, 10)
	// The function's arguments get an object of their own, so that no
	// argument name (cpu, flags, ret, errno) can meet trawl's keys.
	b = append(b, `,"args":{`...)
	if c.Flags&call.ExitOnly == 0 {
		b = append(b, `"args":`...)
		b = appendJSONArgs(b, c.Args)
		b = append(b, ',')
	}
	if len(c.Show) > 0 {
		b = append(b, `"show":`...)
		b = appendJSONShow(b, c.Show)
		b = append(b, ',')
	}
	if c.Ret.Kind != call.KindNone {
		b = append(b, `"ret":`...)
		b = appendJSONValue(b, &c.Ret)
		if c.Ret.Kind == call.KindErrno && c.Ret.Str != "" {
			b = append(b, `,"errno":`...)
			b = appendJSONString(b, c.Ret.Str)
		}
		b = append(b, ',')
	}
	b = append(b, `"cpu":`...)
	b = strconv.AppendUint(b, uint64(c.CPU), 10)
	if c.Chain != 0 {
		b = append(b, `,"chain":`...)
		b = strconv.AppendUint(b, uint64(c.Chain), 10)
	}
	if c.Flags&call.Event != 0 {
		b = append(b, `,"kind":"tracepoint"`...)
	}
	b = appendJSONStack(b, "stack", c.Stack)
	b = appendJSONStack(b, "ustack", c.UStack)
	b = appendJSONFlags(b, c.Flags&^call.Event)
	b = append(b, "}}"...)
	p.buf = b
	_, err := p.w.Write(b)
	return err
}

// Close ends the file and flushes it.
func (p *ChromeJSON) Close() error {
	b := p.buf[:0]
	if p.events == 0 {
		b = append(b, chromeJSONHeader...)
	}
	b = append(b, "\n]}\n"...)
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	return p.w.Flush()
}

const chromeJSONHeader = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"

// appendSep appends the file header before the first event, and a
// separator before the others.
func (p *ChromeJSON) appendSep(b []byte) []byte {
	p.events++
	if p.events == 1 {
		return append(b, chromeJSONHeader...)
	}
	return append(b, ",\n"...)
}

// appendName appends a process_name or thread_name metadata event.
func (p *ChromeJSON) appendName(b []byte, kind string, pid, tid uint64, name string) []byte {
	b = p.appendSep(b)
	b = append(b, `{"name":"`...)
	b = append(b, kind...)
	b = append(b, `","ph":"M","pid":`...)
	b = strconv.AppendUint(b, pid, 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, tid, 10)
	b = append(b, `,"args":{"name":`...)
	b = appendJSONString(b, name)
	return append(b, "}}"...)
}

// appendMicros appends ns as µs with three decimals.
func appendMicros(b []byte, ns uint64) []byte {
	b = strconv.AppendUint(b, ns/1000, 10)
	b = append(b, '.')
	return appendPadded(b, ns%1000, 3)
}

// Flush writes out the buffered output.
func (p *ChromeJSON) Flush() error { return p.w.Flush() }
