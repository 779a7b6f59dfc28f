// SPDX-License-Identifier: Apache-2.0

// Package rawbpf loads and attaches the BPF tracing programs that
// github.com/cilium/ebpf v0.22 cannot handle yet: fsession programs
// (Linux 7.0), the fentry.multi, fexit.multi and fsession.multi programs
// of the tracing_multi link (Linux 7.2, x86-64 only), and raw tracepoints
// with an attach cookie (Linux 6.10).
//
// It speaks bpf(2) directly, one small file per command, so that each piece
// can be replaced by the library's API once the library has it. Programs
// come back as *ebpf.Program and links as link.Link, so the rest of trawl
// uses the library's types throughout.
//
// Errors wrap ebpf.ErrNotSupported when the running kernel lacks the
// feature, ErrVerifier (with the verifier log) when the verifier rejects a
// program, and the errno of the failed call otherwise.
package rawbpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// AttachType is a value of the kernel's enum bpf_attach_type that
// cilium/ebpf v0.22 does not know.
type AttachType uint32

// The attach types of fsession and tracing_multi programs, as in the uapi
// enum bpf_attach_type.
const (
	// AttachTraceFSession runs one program at entry and at exit of one
	// function, sharing a session cookie between the two runs. Linux 7.0.
	AttachTraceFSession AttachType = 58
	// AttachTraceFEntryMulti is fentry on many functions through one
	// tracing_multi link. Linux 7.2, x86-64 only.
	AttachTraceFEntryMulti AttachType = 59
	// AttachTraceFExitMulti is fexit on many functions through one
	// tracing_multi link. Linux 7.2, x86-64 only.
	AttachTraceFExitMulti AttachType = 60
	// AttachTraceFSessionMulti is fsession on many functions through one
	// tracing_multi link. Linux 7.2, x86-64 only.
	AttachTraceFSessionMulti AttachType = 61
)

var attachTypeNames = map[AttachType]string{
	AttachTraceFSession:      "BPF_TRACE_FSESSION",
	AttachTraceFEntryMulti:   "BPF_TRACE_FENTRY_MULTI",
	AttachTraceFExitMulti:    "BPF_TRACE_FEXIT_MULTI",
	AttachTraceFSessionMulti: "BPF_TRACE_FSESSION_MULTI",
}

// String returns the uapi name of a, e.g. "BPF_TRACE_FSESSION".
func (a AttachType) String() string {
	if name, ok := attachTypeNames[a]; ok {
		return name
	}
	return fmt.Sprintf("attach type %d", uint32(a))
}

// Multi reports whether programs of type a attach through a tracing_multi
// link, and so are loaded against MultiFunc rather than a target.
func (a AttachType) Multi() bool {
	return a == AttachTraceFEntryMulti || a == AttachTraceFExitMulti || a == AttachTraceFSessionMulti
}

// MultiFunc is the kernel function, int bpf_multi_func(void), that the
// kernel loads tracing_multi programs against (the program gives no BTF
// id). As it takes no arguments, such a program cannot read its context
// directly ("func 'bpf_multi_func' doesn't have 1-th argument"); it reads
// the arguments of whichever function it runs for with bpf_get_func_arg
// and bpf_get_func_arg_cnt, the return value with bpf_get_func_ret, the
// address with bpf_get_func_ip and the link's per-function cookie with
// bpf_get_attach_cookie.
const MultiFunc = "bpf_multi_func"

// ErrVerifier is wrapped by the error of a program load that the verifier
// rejected; the error's text ends with the verifier log.
var ErrVerifier = errors.New("the BPF verifier rejected the program")

// kernelKnows returns an error wrapping ebpf.ErrNotSupported unless the
// kernel's BTF lists a among the enumerators of enum bpf_attach_type: a
// kernel that does not name an attach type cannot load programs of it.
func kernelKnows(a AttachType) error {
	spec, err := kernel.KernelTypes()
	if err != nil {
		return fmt.Errorf("read kernel BTF: %w", err)
	}
	var enum *btf.Enum
	if err := spec.TypeByName("bpf_attach_type", &enum); err != nil {
		return fmt.Errorf("find enum bpf_attach_type in kernel BTF: %w", err)
	}
	for _, v := range enum.Values {
		if v.Name == a.String() {
			if v.Value != uint64(a) {
				return fmt.Errorf("kernel numbers %s %d, trawl expects %d", v.Name, v.Value, uint32(a))
			}
			return nil
		}
	}
	return fmt.Errorf("kernel has no %s: %w", a, ebpf.ErrNotSupported)
}
