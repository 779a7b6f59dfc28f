// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"io"
	"strconv"
	"time"

	"github.com/trawl-dev/trawl/call"
)

// ANSI colours used on terminals.
const (
	colReset = "\x1b[0m"
	colFunc  = "\x1b[1m"  // bold
	colTask  = "\x1b[36m" // cyan
	colErr   = "\x1b[31m" // red
	colDur   = "\x1b[33m" // yellow
	colNote  = "\x1b[2m"  // dim
)

// Text writes one line per call:
//
//	15:04:05.000123 curl[1234/1235] tcp_sendmsg(sk={family=AF_INET, sport=41234, dport=8080, state=TCP_ESTABLISHED}, msg={...}, size=5) = 5 12.3µs
//
// Values are shown as C-like literals: structs as {name=value, ...}, arrays
// as [a, b, ...+N] (N elements not shown), strings quoted (a trailing ...
// marks a cut or truncated string), pointers as NULL, sym+0xoff or hex,
// enumerators and error returns by name. <truncated> marks a struct whose
// captured bytes ended early, ? a value not captured.
type Text struct {
	w    *bufio.Writer
	f    formatter
	line []byte
}

// NewText returns a Text renderer writing to w.
func NewText(w io.Writer, opts Options) *Text {
	return &Text{w: bufio.NewWriterSize(w, 64<<10), f: newFormatter(opts)}
}

// Call writes c as one line.
func (t *Text) Call(c *call.Call) error {
	b := t.f.appendTime(t.line[:0], c.TS)
	b = append(b, ' ')
	b = t.f.appendTask(b, c)
	b = append(b, ' ')
	b = t.f.appendCall(b, c)
	if c.Duration != 0 {
		b = append(b, ' ')
		b = t.f.appendDuration(b, c.Duration)
	}
	b = append(b, '\n')
	b = t.f.appendStack(b, c, 4)
	t.line = b
	_, err := t.w.Write(b)
	return err
}

// Close flushes the output.
func (t *Text) Close() error { return t.w.Flush() }

// formatter formats the parts of a call as text.
type formatter struct {
	Options
	loc *time.Location
}

func newFormatter(opts Options) formatter {
	loc := opts.Location
	if loc == nil {
		loc = time.Local
	}
	return formatter{Options: opts, loc: loc}
}

func (f *formatter) color(b []byte, c string) []byte {
	if f.Color {
		b = append(b, c...)
	}
	return b
}

// appendTime appends a timestamp: wall-clock time of day with µs when the
// offset is known, else seconds of the kernel clock.
func (f *formatter) appendTime(b []byte, ts uint64) []byte {
	if f.WallOffset != 0 {
		return time.Unix(0, int64(ts)+f.WallOffset).In(f.loc).AppendFormat(b, "15:04:05.000000")
	}
	b = strconv.AppendUint(b, ts/1e9, 10)
	b = append(b, '.')
	return appendPadded(b, ts%1e9/1e3, 6)
}

// appendTask appends comm[pid] or comm[pid/tid] for threads.
func (f *formatter) appendTask(b []byte, c *call.Call) []byte {
	b = f.color(b, colTask)
	b = appendEscaped(b, c.Comm)
	b = append(b, '[')
	b = strconv.AppendUint(b, uint64(c.PID), 10)
	if c.TID != c.PID {
		b = append(b, '/')
		b = strconv.AppendUint(b, uint64(c.TID), 10)
	}
	b = append(b, ']')
	return f.color(b, colReset)
}

// appendCall appends module:func(args) = ret and the call's notes.
func (f *formatter) appendCall(b []byte, c *call.Call) []byte {
	b = f.color(b, colFunc)
	if c.Module != "" {
		b = appendEscaped(b, c.Module)
		b = append(b, ':')
	}
	b = appendEscaped(b, c.Func)
	b = f.color(b, colReset)
	b = append(b, '(')
	if c.Flags&call.ExitOnly != 0 {
		b = append(b, '?')
	}
	for i := range c.Args {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendName(b, c.Args[i].Name, i)
		b = append(b, '=')
		b = f.appendValue(b, &c.Args[i])
	}
	b = append(b, ')')
	switch {
	case c.Flags&call.EntryOnly != 0:
		b = f.color(b, colNote)
		b = append(b, " = ? (no exit)"...)
		b = f.color(b, colReset)
	case c.Ret.Kind != call.KindNone:
		b = append(b, " = "...)
		b = f.appendValue(b, &c.Ret)
	}
	for i := range c.Show {
		if i == 0 {
			b = append(b, " |"...)
		}
		b = append(b, ' ')
		b = appendEscaped(b, c.Show[i].Name)
		b = append(b, '=')
		b = f.appendValue(b, &c.Show[i])
	}
	if c.Flags&call.Missed != 0 {
		b = f.color(b, colNote)
		b = append(b, " [missed events]"...)
		b = f.color(b, colReset)
	}
	if c.Flags&call.Origin != 0 {
		b = f.color(b, colNote)
		b = append(b, " <- error origin"...)
		b = f.color(b, colReset)
	}
	return b
}

// appendStack appends c's kernel stack, then its user stack, a frame a
// line indented by indent spaces, innermost first. Of an error chain,
// only the origin's stacks are shown: the calls out to the entry are on
// them.
func (f *formatter) appendStack(b []byte, c *call.Call, indent int) []byte {
	if c.Chain != 0 && c.Flags&call.Origin == 0 {
		return b
	}
	for _, stack := range [2][]string{c.Stack, c.UStack} {
		for _, frame := range stack {
			for range indent {
				b = append(b, ' ')
			}
			b = f.color(b, colNote)
			b = appendEscaped(b, frame)
			b = f.color(b, colReset)
			b = append(b, '\n')
		}
	}
	return b
}

// appendName appends an argument's name, argN if it has none.
func appendName(b []byte, name string, i int) []byte {
	if name == "" {
		b = append(b, "arg"...)
		return strconv.AppendInt(b, int64(i), 10)
	}
	return appendEscaped(b, name)
}

// appendDuration appends ns in a unit that keeps it short: 850ns, 12.3µs,
// 4.5ms, 2.1s.
func (f *formatter) appendDuration(b []byte, ns uint64) []byte {
	b = f.color(b, colDur)
	b = appendDuration(b, ns)
	return f.color(b, colReset)
}

func appendDuration(b []byte, ns uint64) []byte {
	unit, div := "ns", uint64(1)
	switch {
	case ns >= 1e9:
		unit, div = "s", 1e9
	case ns >= 1e6:
		unit, div = "ms", 1e6
	case ns >= 1e3:
		unit, div = "µs", 1e3
	}
	b = strconv.AppendUint(b, ns/div, 10)
	if div > 1 {
		b = append(b, '.')
		b = append(b, byte('0'+ns%div*10/div))
	}
	return append(b, unit...)
}

// appendValue appends v as a C-like literal.
func (f *formatter) appendValue(b []byte, v *call.Value) []byte {
	switch v.Kind {
	case call.KindUnknown:
		return append(b, '?')
	case call.KindInt:
		if v.IsHex() && v.Int() < 0 {
			b = append(b, '-')
			return appendHex(b, uint64(-v.Int()))
		}
		if v.IsHex() {
			return appendHex(b, v.Uint())
		}
		return strconv.AppendInt(b, v.Int(), 10)
	case call.KindUint:
		if v.IsHex() {
			return appendHex(b, v.Uint())
		}
		return strconv.AppendUint(b, v.Uint(), 10)
	case call.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case call.KindFloat:
		return strconv.AppendFloat(b, v.Float(), 'g', -1, 64)
	case call.KindEnum:
		if v.Str == "" {
			return strconv.AppendUint(b, v.Uint(), 10)
		}
		return appendEscaped(b, v.Str)
	case call.KindString:
		b = strconv.AppendQuote(b, v.Str)
		if v.More > 0 || v.IsTruncated() {
			b = append(b, "..."...)
		}
		return b
	case call.KindBytes:
		b = append(b, '<')
		b = appendHexBytes(b, v.Str)
		if v.More > 0 {
			b = append(b, "..."...)
		}
		return append(b, '>')
	case call.KindPointer:
		return appendPointer(b, v)
	case call.KindErrno:
		b = f.color(b, colErr)
		b = appendErrno(b, v)
		return f.color(b, colReset)
	case call.KindStruct:
		if v.Str != "" {
			return appendEscaped(b, v.Str)
		}
		return f.appendFields(b, v, '{', '}')
	case call.KindArray:
		return f.appendFields(b, v, '[', ']')
	}
	return b
}

func (f *formatter) appendFields(b []byte, v *call.Value, open, close byte) []byte {
	b = append(b, open)
	if v.IsElided() {
		b = append(b, "..."...)
		return append(b, close)
	}
	if v.IsCut() {
		b = append(b, "<cut>"...)
		return append(b, close)
	}
	for i := range v.Fields {
		if i > 0 {
			b = append(b, ", "...)
		}
		if open == '{' {
			b = appendEscaped(b, v.Fields[i].Name)
			b = append(b, '=')
		}
		b = f.appendValue(b, &v.Fields[i])
	}
	sep := len(v.Fields) > 0
	if v.More > 0 {
		if sep {
			b = append(b, ", "...)
		}
		b = append(b, "...+"...)
		b = strconv.AppendInt(b, int64(v.More), 10)
		sep = true
	}
	if v.IsTruncated() && open == '{' {
		if sep {
			b = append(b, ", "...)
		}
		b = append(b, "<truncated>"...)
	}
	return append(b, close)
}

// appendPointer appends NULL, sym, sym+0xoff or the address in hex.
func appendPointer(b []byte, v *call.Value) []byte {
	switch {
	case v.Uint() == 0:
		return append(b, "NULL"...)
	case v.Str != "":
		b = appendEscaped(b, v.Str)
		if v.Off != 0 {
			b = append(b, "+0x"...)
			b = strconv.AppendUint(b, v.Off, 16)
		}
		return b
	}
	return appendHex(b, v.Uint())
}

func appendHex(b []byte, x uint64) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, x, 16)
}

// appendErrno appends -ENAME, or -N for numbers without a name.
func appendErrno(b []byte, v *call.Value) []byte {
	if v.Str == "" {
		return strconv.AppendInt(b, v.Int(), 10)
	}
	b = append(b, '-')
	return appendEscaped(b, v.Str)
}

const hexDigits = "0123456789abcdef"

func appendHexBytes(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		b = append(b, hexDigits[s[i]>>4], hexDigits[s[i]&15])
	}
	return b
}

// appendPadded appends x in decimal, zero-padded to width digits.
func appendPadded(b []byte, x uint64, width int) []byte {
	var d [20]byte
	i := len(d)
	for x > 0 || i > len(d)-width {
		i--
		d[i] = byte('0' + x%10)
		x /= 10
	}
	return append(b, d[i:]...)
}

// Flush writes out the buffered output.
func (t *Text) Flush() error { return t.w.Flush() }
