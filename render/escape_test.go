// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/call"
)

// hostile is what a traced task can put in its name and in the memory
// trawl reads: a screen clear, BEL, a newline that starts a line of its
// own, the C1 CSI byte 0x9b, and bytes that are not UTF-8.
const hostile = "\x1b[2Jx\a\nINJECTED\x9b\xff\xfe"

// hostileCall is a call every name and string of which is hostile.
func hostileCall() call.Call {
	return call.Call{
		TS: 1e9, Duration: 1000, PID: 7, TID: 8, Comm: hostile, Func: "f" + hostile, Module: "m" + hostile,
		Track: 0xa, Flags: call.TrackEnd | call.Origin,
		Args: []call.Value{
			{Kind: call.KindString, Name: "s" + hostile, Str: hostile},
			{Kind: call.KindBytes, Name: "buf", Str: hostile},
			{Kind: call.KindEnum, Name: "reason", Str: "E" + hostile, Bits: 3},
			{Kind: call.KindPointer, Name: "p", Str: "sym" + hostile, Bits: 0xffffffff81000000, Off: 8},
			{Kind: call.KindStruct, Name: "st", Fields: []call.Value{
				{Kind: call.KindInt, Name: "m" + hostile, Bits: 1},
				{Kind: call.KindString, Name: "n", Str: "\u009b[31m" + hostile},
			}},
		},
		Ret:   call.Value{Kind: call.KindErrno, Str: "E" + hostile, Bits: ^uint64(1)},
		Show:  []call.Value{{Kind: call.KindString, Name: "x" + hostile, Str: hostile}},
		Stack: []string{"frame" + hostile, hostile},
	}
}

// TestEscaped checks that nothing the traced system controls reaches
// text, tree, journey or stats output raw: no control character but the
// renderers' own newlines (and colours, off here), no C1 control, no
// invalid UTF-8, and no line the hostile newline would have started.
func TestEscaped(t *testing.T) {
	renderers := map[string]func(*bytes.Buffer) Renderer{
		"text":          func(w *bytes.Buffer) Renderer { return NewText(w, Options{}) },
		"tree":          func(w *bytes.Buffer) Renderer { return NewTree(w, Options{}) },
		"journeys":      func(w *bytes.Buffer) Renderer { return NewJourneys(w, Options{}, false) },
		"journeys tree": func(w *bytes.Buffer) Renderer { return NewJourneys(w, Options{}, true) },
		"stats": func(w *bytes.Buffer) Renderer {
			s, err := NewStats(w, StatsOptions{Histogram: "m" + Escape(hostile) + ":f" + Escape(hostile)})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, newRenderer := range renderers {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			r := newRenderer(&out)
			c := hostileCall()
			if err := r.Call(&c); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if !utf8.ValidString(got) {
				t.Errorf("output not valid UTF-8:\n%q", got)
			}
			for _, r := range got {
				if (r < 0x20 && r != '\n') || (r >= 0x7f && r < 0xa0) {
					t.Errorf("control character %U in output:\n%q", r, got)
					break
				}
			}
			for line := range strings.Lines(got) {
				if strings.HasPrefix(strings.TrimSpace(line), "INJECTED") {
					t.Errorf("a traced name started a line:\n%s", got)
				}
			}
			if !strings.Contains(got, `\x1b[2Jx\x07\x0aINJECTED\x9b\xff\xfe`) {
				t.Errorf("output does not show the name escaped:\n%s", got)
			}
		})
	}
}

// TestAppendEscaped checks the escaping of names byte by byte.
func TestAppendEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"tcp_sendmsg":       "tcp_sendmsg",
		"kworker/0:1H":      "kworker/0:1H",
		"a b~":              "a b~",
		`back\slash`:        `back\\slash`,
		"\x1b[2J":           `\x1b[2J`,
		"bel\a":             `bel\x07`,
		"nl\n\t\r":          `nl\x0a\x09\x0d`,
		"del\x7f":           `del\x7f`,
		"csi\x9b":           `csi\x9b`,
		"c1\u009b":          `c1\xc2\x9b`,
		"bidi\u202e":        `bidi\xe2\x80\xae`,
		"café ünïcode":      "café ünïcode",
		"bad\xff\xfe":       `bad\xff\xfe`,
		"cut\xe2\x82":       `cut\xe2\x82`,
		"rune error \ufffd": "rune error \ufffd",
	} {
		if got := string(appendEscaped(nil, in)); got != want {
			t.Errorf("appendEscaped(%q) = %s, want %s", in, got, want)
		}
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %s, want %s", in, got, want)
		}
	}
}
