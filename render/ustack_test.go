// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

// userStackCall is a call with a kernel and a user stack, innermost
// first, one user frame named by the traced program.
func userStackCall() call.Call {
	return call.Call{TS: t0 + 20, Duration: 900, PID: 7, TID: 7, Comm: "opener", Func: "do_sys_openat2",
		Stack:  []string{"do_sys_openat2+0x0", "__x64_sys_openat+0x55"},
		UStack: []string{"syscall.Syscall6+0x2e [opener]", "os.OpenFile+0x4c [opener]", "evil\x1b[2J+0x1 [opener]", "main.main+0x18 [opener]", "libc.so.6+0x2724a"}}
}

// TestUserStackText: the user frames follow the kernel frames, escaped.
func TestUserStackText(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewText(&out, testOptions), []call.Call{userStackCall()})
	lines := strings.Split(out.String(), "\n")
	var frames []string
	for _, l := range lines[1:] {
		if l != "" {
			frames = append(frames, strings.TrimSpace(l))
		}
	}
	want := []string{"do_sys_openat2+0x0", "__x64_sys_openat+0x55", "syscall.Syscall6+0x2e [opener]", "os.OpenFile+0x4c [opener]", `evil\x1b[2J+0x1 [opener]`, "main.main+0x18 [opener]", "libc.so.6+0x2724a"}
	if strings.Join(frames, "|") != strings.Join(want, "|") {
		t.Errorf("frames\n%q\nwant\n%q", frames, want)
	}
}

// TestUserStackJSON: "ustack" beside "stack", read back as it was.
func TestUserStackJSON(t *testing.T) {
	var out bytes.Buffer
	c := userStackCall()
	renderAll(t, render.NewJSON(&out, testOptions), []call.Call{c})
	if !strings.Contains(out.String(), `,"stack":["do_sys_openat2+0x0","__x64_sys_openat+0x55"],"ustack":["syscall.Syscall6+0x2e [opener]",`) {
		t.Errorf("no ustack beside stack in %s", out.String())
	}
	var back call.Call
	if err := render.NewJSONReader(&out).Read(&back); err != nil {
		t.Fatal(err)
	}
	if strings.Join(back.UStack, "|") != strings.Join(c.UStack, "|") {
		t.Errorf("read back %q, want %q", back.UStack, c.UStack)
	}
}

// TestUserStackFolded: user frames are the root side of the stack.
func TestUserStackFolded(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewFolded(&out), []call.Call{userStackCall(), {Func: "vfs_read", UStack: []string{"read+0x10 [libc.so.6]"}}})
	want := `libc.so.6:read;vfs_read 1
libc.so.6;opener:main.main;opener:evil\x1b[2J;opener:os.OpenFile;opener:syscall.Syscall6;__x64_sys_openat;do_sys_openat2 1
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
