// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/call"
)

// JSON writes one JSON object per call and line (JSON lines). The schema,
// also in docs/json-schema.md:
//
//	ts           number  start of the call, ns of the kernel clock (CLOCK_MONOTONIC);
//	                     the exit time for calls with flag "exit_only"
//	time         string  the start as RFC 3339 wall-clock time with ns; only when
//	                     the wall-clock offset is known
//	cpu          number  CPU the call ended on
//	pid, tid     number  thread group id and thread id
//	comm         string  task name
//	func         string  function name
//	module       string  kernel module; absent for vmlinux
//	args         object  argument name -> value; absent for "exit_only"
//	ret          value   return value; absent for void functions and "entry_only"
//	errno        string  error name ("ENOENT") when ret is a negative error number
//	                     or error pointer; ret then holds the number
//	duration_ns  number  entry to exit; absent when unknown
//	depth        number  traced calls in progress on the task at entry
//	chain        number  the error chain of the call (--entry --errors); absent outside chains
//	origin       bool    true for the innermost call of a chain, where the error appeared; else absent
//	track        string  the call's journey (--track), the address of its first object, "0xhex"
//	stack        array   of strings: the kernel stack at entry (--stack), innermost first, "sym+0xoff [module]"
//	flags        array   of "entry_only", "exit_only", "missed", "track_end" (--track: the call ended its journey); absent when none
//
// Values: integers are numbers (64-bit values may exceed what float64 holds
// exactly), booleans are booleans, floats are numbers (null if not finite),
// enumerators are their name as a string ("A|B" for flags) or their number
// when it has no name, strings are strings (cut at --max-bytes), memory
// without a type is a hex string, pointers are null (NULL), "sym+0xoff" or
// "0xhex" strings, structs and unions are objects of member name -> value,
// arrays are arrays. An object may hold "$more": N (N non-zero members not
// shown), "$truncated": true (the captured bytes ended early),
// "$elided": true (nested deeper than --depth), "$cut": true (a struct
// --depth reached that the per-call byte budget left out, with no
// members) or "$short": "comm[pid]" (the one string a well-known struct
// reads as, which text shows in its place). A cut array ends with
// {"$more": N}. A value that was not captured is null.
//
// The encoder is hand-written, appending to a reused buffer without
// reflection or allocation, because encoding/json costs several times the
// whole per-event budget of 1 µs.
type JSON struct {
	w    *bufio.Writer
	opts Options
	line []byte
	// clock writes the "time" member.
	clock wallClock
}

// NewJSON returns a JSON lines renderer writing to w.
func NewJSON(w io.Writer, opts Options) *JSON {
	return &JSON{w: bufio.NewWriterSize(w, 64<<10), opts: opts}
}

// Call writes c as one JSON object and a newline.
func (j *JSON) Call(c *call.Call) error {
	b := append(j.line[:0], `{"ts":`...)
	b = strconv.AppendUint(b, c.TS, 10)
	if j.opts.WallOffset != 0 {
		b = append(b, `,"time":"`...)
		b = j.clock.appendTime(b, int64(c.TS)+j.opts.WallOffset)
		b = append(b, '"')
	}
	b = append(b, `,"cpu":`...)
	b = strconv.AppendUint(b, uint64(c.CPU), 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(c.PID), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(c.TID), 10)
	b = append(b, `,"comm":`...)
	b = appendJSONString(b, c.Comm)
	b = append(b, `,"func":`...)
	b = appendJSONString(b, c.Func)
	if c.Module != "" {
		b = append(b, `,"module":`...)
		b = appendJSONString(b, c.Module)
	}
	if c.Flags&call.Event != 0 {
		b = append(b, `,"kind":"tracepoint"`...)
	}
	if c.Flags&call.ExitOnly == 0 {
		b = append(b, `,"args":`...)
		b = appendJSONArgs(b, c.Args)
	}
	if c.Ret.Kind != call.KindNone {
		b = append(b, `,"ret":`...)
		b = appendJSONValue(b, &c.Ret)
		if c.Ret.Kind == call.KindErrno && c.Ret.Str != "" {
			b = append(b, `,"errno":`...)
			b = appendJSONString(b, c.Ret.Str)
		}
	}
	if len(c.Show) > 0 {
		b = append(b, `,"show":`...)
		b = appendJSONShow(b, c.Show)
	}
	if c.Duration != 0 {
		b = append(b, `,"duration_ns":`...)
		b = strconv.AppendUint(b, c.Duration, 10)
	}
	b = append(b, `,"depth":`...)
	b = strconv.AppendInt(b, int64(c.Depth), 10)
	if c.Chain != 0 {
		b = append(b, `,"chain":`...)
		b = strconv.AppendUint(b, uint64(c.Chain), 10)
	}
	if c.Flags&call.Origin != 0 {
		b = append(b, `,"origin":true`...)
	}
	if c.Track != 0 {
		b = append(b, `,"track":"0x`...)
		b = strconv.AppendUint(b, c.Track, 16)
		b = append(b, '"')
	}
	b = appendJSONStack(b, "stack", c.Stack)
	b = appendJSONStack(b, "ustack", c.UStack)
	b = appendJSONFlags(b, c.Flags&^(call.Origin|call.Event))
	b = append(b, "}\n"...)
	j.line = b
	_, err := j.w.Write(b)
	return err
}

// Close flushes the output.
func (j *JSON) Close() error { return j.w.Flush() }

// appendJSONStack appends the key of a stack a call has: "stack", its
// kernel stack, or "ustack", its user stack.
func appendJSONStack(b []byte, key string, stack []string) []byte {
	if stack == nil {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, frame := range stack {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, frame)
	}
	return append(b, ']')
}

// appendJSONArgs appends the arguments as an object.
func appendJSONArgs(b []byte, args []call.Value) []byte {
	b = append(b, '{')
	for i := range args {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = appendName(b, args[i].Name, i) // C identifiers need no escaping
		b = append(b, `":`...)
		b = appendJSONValue(b, &args[i])
	}
	return append(b, '}')
}

// appendJSONShow appends the --show values as an object keyed by their
// expressions.
func appendJSONShow(b []byte, show []call.Value) []byte {
	b = append(b, '{')
	for i := range show {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, show[i].Name)
		b = append(b, ':')
		b = appendJSONValue(b, &show[i])
	}
	return append(b, '}')
}

func appendJSONFlags(b []byte, f call.CallFlags) []byte {
	if f == 0 {
		return b
	}
	b = append(b, `,"flags":[`...)
	sep := false
	for _, fl := range []struct {
		flag call.CallFlags
		name string
	}{{call.EntryOnly, `"entry_only"`}, {call.ExitOnly, `"exit_only"`}, {call.Missed, `"missed"`}, {call.Origin, `"origin"`}, {call.TrackEnd, `"track_end"`}} {
		if f&fl.flag != 0 {
			if sep {
				b = append(b, ',')
			}
			b = append(b, fl.name...)
			sep = true
		}
	}
	return append(b, ']')
}

// AppendJSONValue appends v as the JSON renderer writes it (see JSON):
// for other exporters that carry a value as JSON text.
func AppendJSONValue(b []byte, v *call.Value) []byte { return appendJSONValue(b, v) }

// appendJSONValue appends v following the schema in the JSON doc comment.
func appendJSONValue(b []byte, v *call.Value) []byte {
	switch v.Kind {
	case call.KindInt, call.KindErrno:
		return strconv.AppendInt(b, v.Int(), 10)
	case call.KindUint:
		return strconv.AppendUint(b, v.Uint(), 10)
	case call.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case call.KindFloat:
		if x := v.Float(); !math.IsInf(x, 0) && !math.IsNaN(x) {
			return strconv.AppendFloat(b, x, 'g', -1, 64)
		}
	case call.KindEnum:
		if v.Str == "" {
			return strconv.AppendUint(b, v.Uint(), 10)
		}
		return appendJSONString(b, v.Str)
	case call.KindString:
		return appendJSONString(b, v.Str)
	case call.KindBytes:
		b = append(b, '"')
		b = appendHexBytes(b, v.Str)
		return append(b, '"')
	case call.KindPointer:
		if v.Uint() == 0 {
			break
		}
		b = append(b, '"')
		b = appendPointer(b, v) // symbol names and hex need no escaping
		return append(b, '"')
	case call.KindStruct:
		return appendJSONObject(b, v)
	case call.KindArray:
		return appendJSONArray(b, v)
	}
	return append(b, "null"...)
}

func appendJSONObject(b []byte, v *call.Value) []byte {
	b = append(b, '{')
	for i := range v.Fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v.Fields[i].Name)
		b = append(b, ':')
		b = appendJSONValue(b, &v.Fields[i])
	}
	sep := len(v.Fields) > 0
	if v.More > 0 {
		b = appendMark(b, sep, `"$more":`)
		b = strconv.AppendInt(b, int64(v.More), 10)
		sep = true
	}
	if v.IsTruncated() {
		b = appendMark(b, sep, `"$truncated":true`)
		sep = true
	}
	if v.IsElided() {
		b = appendMark(b, sep, `"$elided":true`)
		sep = true
	}
	if v.IsCut() {
		b = appendMark(b, sep, `"$cut":true`)
		sep = true
	}
	if v.Str != "" {
		b = appendMark(b, sep, `"$short":`)
		b = appendJSONString(b, v.Str)
	}
	return append(b, '}')
}

// appendMark appends a key of the "$" family, after a comma if sep.
func appendMark(b []byte, sep bool, key string) []byte {
	if sep {
		b = append(b, ',')
	}
	return append(b, key...)
}

func appendJSONArray(b []byte, v *call.Value) []byte {
	if v.IsElided() {
		return append(b, `{"$elided":true}`...)
	}
	b = append(b, '[')
	for i := range v.Fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONValue(b, &v.Fields[i])
	}
	if v.More > 0 {
		if len(v.Fields) > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"$more":`...)
		b = strconv.AppendInt(b, int64(v.More), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string. Kernel strings are bytes:
// invalid UTF-8 becomes U+FFFD; control characters and U+2028/U+2029 are
// escaped so that the output is also valid JavaScript.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, `\n`...)
			case '\t':
				b = append(b, `\t`...)
			case '\r':
				b = append(b, `\r`...)
			default:
				b = append(b, `\u00`...)
				b = append(b, hexDigits[c>>4], hexDigits[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, `\u202`...)
				b = append(b, hexDigits[r&15])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Flush writes out the buffered output.
func (j *JSON) Flush() error { return j.w.Flush() }

// wallClock formats wall-clock times, keeping the text of the last minute
// it formatted: calls come in time order, most within the same minute.
type wallClock struct {
	minute int64  // Unix time in ns of the minute's start
	stamp  []byte // its text up to the seconds: "2026-01-02T15:04:"
}

// appendTime appends Unix time ns in UTC as time.RFC3339Nano formats it.
func (w *wallClock) appendTime(b []byte, ns int64) []byte {
	if ns < 0 {
		return time.Unix(0, ns).UTC().AppendFormat(b, time.RFC3339Nano)
	}
	minute := ns - ns%(60*1e9)
	if w.stamp == nil || minute != w.minute {
		w.minute = minute
		w.stamp = time.Unix(0, minute).UTC().AppendFormat(w.stamp[:0], "2006-01-02T15:04:")
	}
	b = append(b, w.stamp...)
	sec, frac := (ns-minute)/1e9, (ns-minute)%1e9
	b = append(b, byte('0'+sec/10), byte('0'+sec%10))
	if frac != 0 {
		var digits [9]byte
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i] = byte('0' + frac%10)
			frac /= 10
		}
		n := len(digits)
		for digits[n-1] == '0' {
			n--
		}
		b = append(append(b, '.'), digits[:n]...)
	}
	return append(b, 'Z')
}
