// SPDX-License-Identifier: Apache-2.0

package rawbpf

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// multiLinkAttr is the BPF_LINK_CREATE member of union bpf_attr with its
// tracing_multi variant, offsets of Linux 7.3.
type multiLinkAttr struct {
	progFD     uint32         // 0
	targetFD   uint32         // 4
	attachType uint32         // 8
	flags      uint32         // 12
	ids        unsafe.Pointer // 16: __u32 BTF ids
	cookies    unsafe.Pointer // 24: __u64 cookies, or NULL
	cnt        uint32         // 32
	_          uint32
}

// tracingLinkAttr is the BPF_LINK_CREATE member of union bpf_attr with its
// tracing variant (Linux 5.19 for the cookie).
type tracingLinkAttr struct {
	progFD      uint32 // 0
	targetFD    uint32 // 4
	attachType  uint32 // 8
	flags       uint32 // 12
	targetBTFID uint32 // 16: 0 for the function the program was loaded against
	_           uint32
	cookie      uint64 // 24
}

// AttachTracingMulti creates a tracing_multi link (link type 15) that runs
// prog, loaded with LoadTracing for a multi attach type at, on entry and/or
// exit of every function in ids, given as BTF ids of the object prog was
// loaded against (vmlinux, or TracingSpec.AttachBTF). cookies is
// empty or holds one value per function; the program reads it with
// bpf_get_attach_cookie. The kernel attaches to all functions or none.
//
// Linux 7.2, x86-64 only; older kernels and other architectures give an
// error wrapping ebpf.ErrNotSupported.
func AttachTracingMulti(prog *ebpf.Program, at AttachType, ids []btf.TypeID, cookies []uint64) (link.Link, error) {
	if !at.Multi() {
		return nil, fmt.Errorf("attach type %s is not a tracing_multi one", at)
	}
	if len(ids) == 0 {
		return nil, errors.New("create tracing_multi link: no functions")
	}
	if len(cookies) != 0 && len(cookies) != len(ids) {
		return nil, fmt.Errorf("create tracing_multi link: %d cookies for %d functions", len(cookies), len(ids))
	}
	if err := kernelKnows(at); err != nil {
		return nil, fmt.Errorf("create tracing_multi link: %w", err)
	}
	attr := multiLinkAttr{
		progFD:     uint32(prog.FD()),
		attachType: uint32(at),
		ids:        unsafe.Pointer(&ids[0]),
		cnt:        uint32(len(ids)),
	}
	if len(cookies) != 0 {
		attr.cookies = unsafe.Pointer(&cookies[0])
	}
	return createLink(&attr, fmt.Sprintf("create %s link for %d functions", at, len(ids)))
}

// AttachTracing creates a tracing link (link type 2) for a program loaded
// with LoadTracing for AttachTraceFSession, attaching it to the function
// it was loaded against; the program reads cookie with
// bpf_get_attach_cookie. Linux 7.0.
func AttachTracing(prog *ebpf.Program, at AttachType, cookie uint64) (link.Link, error) {
	if at.Multi() {
		return nil, fmt.Errorf("attach type %s needs a tracing_multi link", at)
	}
	attr := tracingLinkAttr{
		progFD:     uint32(prog.FD()),
		attachType: uint32(at),
		cookie:     cookie,
	}
	return createLink(&attr, fmt.Sprintf("create %s link", at))
}

// createLink calls BPF_LINK_CREATE and wraps the new link.
func createLink[T multiLinkAttr | tracingLinkAttr](attr *T, what string) (link.Link, error) {
	fd, err := bpf(cmdLinkCreate, attr)
	if errors.Is(err, errENOTSUPP) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil, fmt.Errorf("%s: %w (%w)", what, ebpf.ErrNotSupported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	l, err := link.NewFromFD(fd)
	if err != nil {
		return nil, fmt.Errorf("%s: wrap link: %w", what, err)
	}
	return l, nil
}
