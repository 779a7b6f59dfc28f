// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

// stackCalls are calls with kernel stacks, innermost first, as --stack
// takes them.
func stackCalls() []call.Call {
	read := []string{"vfs_read+0x0", "ksys_read+0x6b", "do_syscall_64+0x82", "entry_SYSCALL_64_after_hwframe+0x76"}
	recv := []string{"tcp_recvmsg+0x4 [tcp]", "inet_recvmsg+0x5e", "sock_read_iter+0x8a", "vfs_read+0x1f1", "ksys_read+0x6b"}
	return []call.Call{
		{Func: "vfs_read", Duration: 1500, Stack: read},
		{Func: "vfs_read", Duration: 2500, Stack: read},
		{Func: "tcp_recvmsg", Module: "tcp", Duration: 30000, Stack: recv, Ret: call.Value{Kind: call.KindErrno, Bits: uint64(^uint64(10) + 1), Str: "EAGAIN"}},
		{Func: "vfs_read", Duration: 800, Stack: []string{"vfs_read+0x0", "0xffffffffc0de0042"}},
		// The trampoline backends put the function first; a stack that
		// does not have it gets it as the leaf.
		{Func: "vfs_write", Duration: 900, Stack: []string{"ksys_write+0x6b"}},
		{Func: "vfs_write", Duration: 1100},
		{Func: "evil; name\nhere", Comm: "x", Duration: 10, Stack: []string{"a b+0x1 [m;d]"}},
	}
}

func TestFolded(t *testing.T) {
	var out bytes.Buffer
	renderAll(t, render.NewFolded(&out), stackCalls())
	want := `0xffffffffc0de0042;vfs_read 1
entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_read;vfs_read 2
ksys_read;vfs_read;sock_read_iter;inet_recvmsg;tcp:tcp_recvmsg 1
ksys_write;vfs_write 1
m\x3bd:a\x20b;evil\x3b\x20name\x0ahere 1
vfs_write 1
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestFoldedCounts checks the folded lines of counts by stack made
// elsewhere (in the kernel, with --stats), added to the calls': the
// counts of a stack add up across processes and with the calls', and
// the markers of stacks the kernel could not keep are frames of their
// own.
func TestFoldedCounts(t *testing.T) {
	read := []string{"vfs_read+0x0", "ksys_read+0x6b", "do_syscall_64+0x82"}
	user := []string{"read+0x12 [libc.so.6]", "main+0x40 [cat]"}
	counts := []call.StackCount{
		{Func: "vfs_read", Stack: read, UStack: user, PID: 10, Calls: 7},
		{Func: "vfs_read", Stack: read, UStack: user, PID: 11, Calls: 3},
		{Func: "vfs_read", Stack: read, Calls: 5}, // a kernel thread
		{Func: "vfs_read", Stack: []string{call.LostStack}, UStack: user, PID: 10, Calls: 2},
		{Func: "vfs_read", Stack: read, UStack: []string{call.LostStack}, PID: 12, Calls: 4},
		{Func: "tcp_recvmsg", Module: "tcp", Stack: []string{call.UncountedStack}, Calls: 6},
		{Func: "vfs_write", Calls: 9},
	}
	var out bytes.Buffer
	f := render.NewFoldedCounts(&out, func() ([]call.StackCount, error) { return counts, nil })
	renderAll(t, f, []call.Call{{Func: "vfs_write"}, {Func: "vfs_read", Stack: read, UStack: user}})
	want := `[stack-lost];do_syscall_64;ksys_read;vfs_read 4
[stack-not-counted];tcp:tcp_recvmsg 6
cat:main;libc.so.6:read;[stack-lost];vfs_read 2
cat:main;libc.so.6:read;do_syscall_64;ksys_read;vfs_read 11
do_syscall_64;ksys_read;vfs_read 5
vfs_write 10
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestFoldedCountsError checks that a source that fails fails Close.
func TestFoldedCountsError(t *testing.T) {
	f := render.NewFoldedCounts(&bytes.Buffer{}, func() ([]call.StackCount, error) { return nil, errors.New("gone") })
	if err := f.Close(); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Close: %v, want the source's error", err)
	}
}
