// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/trawl-dev/trawl/call"
)

// Folded counts the calls by stack and writes them at Close in the folded
// stack format of flamegraph.pl, inferno and speedscope: one line per
// stack, its frames root first separated by ';', a space and the number
// of calls. A call's stack is its user stack (call.Call UStack) then its
// kernel stack (Stack), with the traced function as the leaf; a call
// without a stack is its function alone. Frames are function names,
// "module:name" outside vmlinux ("binary:name" in user space),
// without the offset into the function, so that the calls of a function
// add up however it was reached inside its callers. Names are escaped as
// the text format escapes them, and a ';' or a space inside a name is
// written \x3b or \x20, so that no name breaks a line's fields.
type Folded struct {
	w      *bufio.Writer
	stacks stackCounts
	source func() ([]call.StackCount, error)
}

// NewFolded returns a folded stack renderer writing to w.
func NewFolded(w io.Writer) *Folded {
	return &Folded{w: bufio.NewWriter(w), stacks: stackCounts{}}
}

// NewFoldedCounts returns a folded stack renderer writing to w the calls
// source gives at Close, counted elsewhere (in the kernel:
// Session.StackCounts), as well as those of Call.
func NewFoldedCounts(w io.Writer, source func() ([]call.StackCount, error)) *Folded {
	f := NewFolded(w)
	f.source = source
	return f
}

// Call counts c under its stack.
func (f *Folded) Call(c *call.Call) error {
	f.stacks.add(c.Func, c.Module, c.UStack, c.Stack, 1)
	return nil
}

// Flush does nothing: the stacks are written at Close.
func (f *Folded) Flush() error { return nil }

// Close writes the stacks, sorted, and flushes.
func (f *Folded) Close() error {
	if f.source != nil {
		counts, err := f.source()
		if err != nil {
			return fmt.Errorf("read the counts by stack: %w", err)
		}
		for _, c := range counts {
			f.stacks.add(c.Func, c.Module, c.UStack, c.Stack, c.Calls)
		}
	}
	lines := make([]string, 0, len(f.stacks))
	for stack, n := range f.stacks {
		frames := strings.Split(stack, stackSep)
		for i := range frames {
			frames[i] = foldedEscaper.Replace(frames[i])
		}
		lines = append(lines, strings.Join(frames, ";")+" "+strconv.FormatUint(n, 10)+"\n")
	}
	slices.Sort(lines)
	for _, l := range lines {
		f.w.WriteString(l)
	}
	return f.w.Flush()
}

// stackCounts counts calls by stack: the escaped names of its frames,
// root first, joined by stackSep.
type stackCounts map[string]uint64

// stackSep separates frames in stackCounts: a NUL, which escaping
// leaves out of names.
const stackSep = "\x00"

// add counts n calls of function fn of module mod under their user and
// kernel stacks.
func (sc stackCounts) add(fn, mod string, ustack, stack []string, n uint64) {
	leaf := frameName(fn, mod)
	var frames []string
	for _, st := range [][]string{ustack, stack} {
		for i := len(st) - 1; i >= 0; i-- {
			frames = append(frames, stackFrame(st[i]))
		}
	}
	// The stack begins at the traced function, unless it could not be
	// symbolised.
	if len(frames) == 0 || frames[len(frames)-1] != leaf {
		frames = append(frames, leaf)
	}
	sc[strings.Join(frames, stackSep)] += n
}

// stackFrame returns the escaped name of a stack frame, "sym+0xoff
// [module]" or "sym+0xoff": "module:sym" or "sym".
func stackFrame(frame string) string {
	sym, mod, ok := strings.Cut(frame, " [")
	if ok {
		mod = strings.TrimSuffix(mod, "]")
	}
	if i := strings.LastIndex(sym, "+0x"); i > 0 {
		sym = sym[:i]
	}
	return frameName(sym, mod)
}

// frameName returns the escaped name of function name of module mod
// ("" for vmlinux).
func frameName(name, mod string) string {
	if mod != "" {
		name = mod + ":" + name
	}
	return Escape(name)
}

// foldedEscaper escapes the separators of the folded format.
var foldedEscaper = strings.NewReplacer(";", `\x3b`, " ", `\x20`)
