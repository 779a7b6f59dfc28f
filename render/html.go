// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	_ "embed"
	"fmt"
	"hash/fnv"
	"html/template"
	"io"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/call"
)

// HTML writes, at Close, one self-contained HTML page of the trace: a
// table of the functions (calls, errors, latency percentiles), sortable
// by a few lines of inline JavaScript and readable without; each
// function's latency histogram per power of two; and a flame graph of
// the calls' stacks, as Folded counts them, drawn as inline SVG with a
// tooltip per frame. The page loads nothing: no script, style sheet or
// font from elsewhere. html/template escapes every name, after the
// escaping of the text format.
type HTML struct {
	w      io.Writer
	funcs  funcTable
	stacks stackCounts
}

// NewHTML returns an HTML renderer writing to w.
func NewHTML(w io.Writer) *HTML {
	return &HTML{w: w, funcs: funcTable{}, stacks: stackCounts{}}
}

// Call adds c to the figures and the flame graph.
func (h *HTML) Call(c *call.Call) error {
	h.funcs.add(c)
	h.stacks.add(c.Func, c.Module, c.UStack, c.Stack, 1)
	return nil
}

// Flush does nothing: the page is written at Close.
func (h *HTML) Flush() error { return nil }

//go:embed html.tmpl
var htmlSource string

var htmlPage = template.Must(template.New("page").Parse(htmlSource))

// Close writes the page.
func (h *HTML) Close() error {
	page := struct {
		Calls  uint64
		Rows   []htmlRow
		Flame  []flameRect
		Height int
		Width  int
	}{Width: flameWidth}
	for _, f := range h.funcs.rows("count") {
		page.Calls += f.calls
		page.Rows = append(page.Rows, newHTMLRow(f))
	}
	page.Flame, page.Height = flameGraph(h.stacks)
	w := bufio.NewWriter(h.w)
	if err := htmlPage.Execute(w, page); err != nil {
		return err
	}
	return w.Flush()
}

// htmlRow is a function's row in the table, with its histogram.
type htmlRow struct {
	Name                      string
	Calls, Errors             uint64
	P50, P90, P99, Max        string
	P50ns, P90ns, P99ns, Maxn uint64
	Bars                      []htmlBar
	Height                    int
}

// htmlBar is one power of two of a latency histogram.
type htmlBar struct {
	Label string
	Count uint64
	Y     int
	Width float64
}

// The sizes of the drawings, in pixels.
const (
	flameWidth = 1200
	frameH     = 18
	barH       = 16
	barWidth   = 400
)

func newHTMLRow(f *funcStats) htmlRow {
	h := &f.hist
	r := htmlRow{Name: f.name, Calls: f.calls, Errors: f.errors,
		P50: latency(h, 0.5), P90: latency(h, 0.9), P99: latency(h, 0.99), Max: latency(h, 1),
		P50ns: h.Quantile(0.5), P90ns: h.Quantile(0.9), P99ns: h.Quantile(0.99), Maxn: h.Max()}
	counts := log2Counts(h)
	first := slices.IndexFunc(counts, func(n uint64) bool { return n > 0 })
	if first < 0 {
		return r
	}
	most := slices.Max(counts)
	for k := first; k < len(counts); k++ {
		var lo, hi uint64 = 0, 1
		if k > 0 {
			lo, hi = 1<<(k-1), 1<<k
		}
		r.Bars = append(r.Bars, htmlBar{
			Label: fmt.Sprintf("[%s, %s)", appendDuration(nil, lo), appendDuration(nil, hi)),
			Count: counts[k], Y: len(r.Bars) * barH,
			Width: float64(counts[k]) * barWidth / float64(most),
		})
	}
	r.Height = len(r.Bars) * barH
	return r
}

// flameRect is a frame of the flame graph.
type flameRect struct {
	Name, Label string
	Count       uint64
	Percent     float64
	X, Y, W     float64
	Color       string
}

// flameNode is a frame in the tree of stacks.
type flameNode struct {
	name     string
	count    uint64
	children map[string]*flameNode
}

// flameGraph lays the stacks out root at the top (an icicle graph), each
// frame as wide as its share of the calls, and returns the frames wider
// than a pixel and the height.
func flameGraph(stacks stackCounts) ([]flameRect, int) {
	root := &flameNode{name: "all", children: map[string]*flameNode{}}
	for stack, n := range stacks {
		node := root
		root.count += n
		for name := range strings.SplitSeq(stack, stackSep) {
			child := node.children[name]
			if child == nil {
				child = &flameNode{name: name, children: map[string]*flameNode{}}
				node.children[name] = child
			}
			child.count += n
			node = child
		}
	}
	if root.count == 0 {
		return nil, 0
	}
	var rects []flameRect
	depth := 0
	var lay func(n *flameNode, x float64, d int)
	lay = func(n *flameNode, x float64, d int) {
		w := float64(n.count) * flameWidth / float64(root.count)
		if w < 1 {
			return
		}
		depth = max(depth, d+1)
		label := ""
		if chars := int(w-6) / 7; chars >= 3 {
			label = n.name
			if r := []rune(label); len(r) > chars {
				label = string(r[:chars-2]) + ".."
			}
		}
		rects = append(rects, flameRect{Name: n.name, Label: label, Count: n.count,
			Percent: 100 * float64(n.count) / float64(root.count),
			X:       x, Y: float64(d * frameH), W: w, Color: frameColor(n.name)})
		names := make([]string, 0, len(n.children))
		for name := range n.children {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c := n.children[name]
			lay(c, x, d+1)
			x += float64(c.count) * flameWidth / float64(root.count)
		}
	}
	lay(root, 0, 0)
	return rects, depth * frameH
}

// frameColor returns a warm colour that depends only on the name, so
// that a function keeps its colour.
func frameColor(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	return fmt.Sprintf("rgb(%d,%d,%d)", 205+v%50, 80+(v>>8)%120, 30+(v>>16)%50)
}
