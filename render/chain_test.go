// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
)

// chainCalls are an error chain as the pipeline hands it over: the
// origin first, its entry call last, each with its stack.
func chainCalls() []call.Call {
	ret := call.Value{Kind: call.KindErrno, Bits: uint64(1<<64 - 20), Str: "ENOTDIR"}
	return []call.Call{
		{TS: 3, Duration: 1, PID: 7, TID: 7, Comm: "cat", Func: "link_path_walk", Depth: 2, Ret: ret, Chain: 4, Flags: call.Origin,
			Stack: []string{"link_path_walk+0x5", "path_openat+0x8c", "do_syscall_64+0x82"}},
		{TS: 2, Duration: 3, PID: 7, TID: 7, Comm: "cat", Func: "path_openat", Depth: 1, Ret: ret, Chain: 4,
			Stack: []string{"path_openat+0x5", "do_syscall_64+0x82"}},
		{TS: 1, Duration: 5, PID: 7, TID: 7, Comm: "cat", Func: "do_sys_openat2", Ret: ret, Chain: 4,
			Stack: []string{"do_sys_openat2+0x5 [x]"}},
	}
}

func TestChainJSON(t *testing.T) {
	var out bytes.Buffer
	r := NewJSON(&out, Options{})
	for _, c := range chainCalls() {
		if err := r.Call(&c); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	origins := 0
	for line := range strings.Lines(out.String()) {
		var c struct {
			Chain  uint32
			Origin bool
			Stack  []string
			Flags  []string
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if c.Chain != 4 || len(c.Stack) == 0 || c.Flags != nil {
			t.Errorf("want chain 4, a stack and no flags: %s", line)
		}
		if c.Origin {
			origins++
		}
	}
	if origins != 1 || !strings.Contains(out.String(), `"stack":["do_sys_openat2+0x5 [x]"]`) {
		t.Errorf("want one origin and the entry's stack:\n%s", out.String())
	}
}

func TestChainText(t *testing.T) {
	for name, r := range map[string]func(*bytes.Buffer) Renderer{
		"text": func(b *bytes.Buffer) Renderer { return NewText(b, Options{}) },
		"tree": func(b *bytes.Buffer) Renderer { return NewTree(b, Options{}) },
	} {
		var out bytes.Buffer
		rr := r(&out)
		for _, c := range chainCalls() {
			if err := rr.Call(&c); err != nil {
				t.Fatal(err)
			}
		}
		rr.Close()
		s := out.String()
		// Only the origin's stack is shown, indented under it.
		if strings.Count(s, "<- error origin") != 1 || strings.Count(s, "do_syscall_64+0x82") != 1 ||
			!strings.Contains(s, "    path_openat+0x8c\n") || strings.Contains(s, "[x]") {
			t.Errorf("%s: want the origin marked and only its stack:\n%s", name, s)
		}
	}
}
