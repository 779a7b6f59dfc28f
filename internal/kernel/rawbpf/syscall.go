// SPDX-License-Identifier: Apache-2.0

package rawbpf

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bpf(2) commands used here.
const (
	cmdProgLoad   = 5
	cmdLinkCreate = 28
)

// bpf calls bpf(2) with an attribute struct and returns the new file
// descriptor. attr's pointer fields keep what they point to alive.
func bpf[T any](cmd uintptr, attr *T) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
	runtime.KeepAlive(attr)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// errENOTSUPP is the kernel-internal ENOTSUPP (524) that leaks out of
// bpf(2) when an arch's JIT lacks a trampoline feature.
const errENOTSUPP = unix.Errno(524)
