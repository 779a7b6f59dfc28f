// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/call"
)

// maxBuffered bounds the calls buffered for one task: a larger tree is
// written as far as it got.
const maxBuffered = 1 << 16

// Tree writes calls as a call tree per task, like a function-graph tracer:
//
//	22:13:20.000000 cat[5000/5001] cpu 0
//	     8.0µs  do_sys_openat2(dfd=-100, filename="/etc/passwd", how={flags=0x8000}) = -ENOENT
//	     4.2µs    do_filp_open(dfd=-100, pathname=0xffff888004b2c000, op=0xffffc90000a3fe10) = -ENOENT
//
// What the pipeline must give it: every call of a task in completion order
// (children before their parent, as exits arrive), each with Depth set to
// the number of traced calls of the same task in progress at its entry. A
// task's calls are buffered until one of depth 0 completes; its tree is then
// written in start order (TS, then Depth), indented by Depth. Close writes
// the trees whose outermost call never completed.
type Tree struct {
	w     *bufio.Writer
	f     formatter
	tasks map[uint32][]call.Call
	line  []byte
}

// NewTree returns a Tree renderer writing to w.
func NewTree(w io.Writer, opts Options) *Tree {
	return &Tree{w: bufio.NewWriterSize(w, 64<<10), f: newFormatter(opts), tasks: map[uint32][]call.Call{}}
}

// Call buffers c and writes its task's tree when c is the outermost call.
func (t *Tree) Call(c *call.Call) error {
	pending := t.tasks[c.TID]
	if c.Depth == 0 && len(pending) == 0 {
		return t.write([]call.Call{*c})
	}
	cp := *c
	cp.Args = slices.Clone(c.Args)
	cp.Show = slices.Clone(c.Show)
	pending = append(pending, cp)
	if c.Depth > 0 && len(pending) < maxBuffered {
		t.tasks[c.TID] = pending
		return nil
	}
	delete(t.tasks, c.TID)
	return t.write(pending)
}

// Close writes the unfinished trees, by task id, and flushes.
func (t *Tree) Close() error {
	tids := make([]uint32, 0, len(t.tasks))
	for tid := range t.tasks {
		tids = append(tids, tid)
	}
	slices.Sort(tids)
	for _, tid := range tids {
		if err := t.write(t.tasks[tid]); err != nil {
			return err
		}
		delete(t.tasks, tid)
	}
	return t.w.Flush()
}

// write writes one task's calls as a tree under a header naming the task.
func (t *Tree) write(calls []call.Call) error {
	slices.SortStableFunc(calls, func(a, b call.Call) int {
		return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(a.Depth, b.Depth))
	})
	root := &calls[0]
	b := t.f.appendTime(t.line[:0], root.TS)
	b = append(b, ' ')
	b = t.f.appendTask(b, root)
	b = append(b, " cpu "...)
	b = strconv.AppendUint(b, uint64(root.CPU), 10)
	b = append(b, '\n')
	for i := range calls {
		c := &calls[i]
		b = appendDurationColumn(b, &t.f, c.Duration)
		b = append(b, "  "...)
		for range min(max(c.Depth, 0), 64) {
			b = append(b, "  "...)
		}
		b = t.f.appendCall(b, c)
		b = append(b, '\n')
		b = t.f.appendStack(b, c, durationWidth+6+2*min(max(c.Depth, 0), 64))
	}
	t.line = b
	_, err := t.w.Write(b)
	return err
}

// durationWidth is the width of the duration column, in characters.
const durationWidth = 10

// appendDurationColumn appends d right-aligned in the duration column,
// blank when unknown.
func appendDurationColumn(b []byte, f *formatter, d uint64) []byte {
	var tmp [24]byte
	s := tmp[:0]
	if d != 0 {
		s = appendDuration(s, d)
	}
	for range durationWidth - utf8.RuneCount(s) {
		b = append(b, ' ')
	}
	b = f.color(b, colDur)
	b = append(b, s...)
	return f.color(b, colReset)
}

// Flush writes out the buffered output.
func (t *Tree) Flush() error { return t.w.Flush() }
