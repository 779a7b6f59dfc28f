// SPDX-License-Identifier: Apache-2.0

package rawbpf

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// cmdRawTracepointOpen is BPF_RAW_TRACEPOINT_OPEN.
const cmdRawTracepointOpen = 17

// rawTracepointAttr is the BPF_RAW_TRACEPOINT_OPEN member of union
// bpf_attr, with the cookie of Linux 6.10.
type rawTracepointAttr struct {
	name   unsafe.Pointer // 0: the tracepoint's name, NUL-terminated
	progFD uint32         // 8
	_      uint32
	cookie uint64 // 16
}

// AttachRawTracepoint attaches prog, a raw_tp program
// (BPF_PROG_TYPE_RAW_TRACEPOINT), to the tracepoint name with an attach
// cookie, which the program reads with bpf_get_attach_cookie: one program
// can then serve many tracepoints and tell them apart. cilium/ebpf v0.22's
// link.AttachRawTracepoint takes no cookie. Linux 6.10; older kernels
// refuse a cookie with EINVAL.
func AttachRawTracepoint(prog *ebpf.Program, name string, cookie uint64) (link.Link, error) {
	tp, err := unix.BytePtrFromString(name)
	if err != nil {
		return nil, fmt.Errorf("raw tracepoint %q: %w", name, err)
	}
	attr := rawTracepointAttr{name: unsafe.Pointer(tp), progFD: uint32(prog.FD()), cookie: cookie}
	fd, err := bpf(cmdRawTracepointOpen, &attr)
	if err != nil {
		return nil, fmt.Errorf("open raw tracepoint %s: %w", name, err)
	}
	l, err := link.NewFromFD(fd) // closes fd on error
	if err != nil {
		return nil, fmt.Errorf("open raw tracepoint %s: wrap link: %w", name, err)
	}
	return l, nil
}
