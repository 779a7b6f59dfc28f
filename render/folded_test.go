// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"bytes"
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
