// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"fmt"
)

// Family is how the backends of a kind attach and read arguments, which
// decides what functions they can attach.
type Family uint8

// The argument families.
const (
	// Trampoline covers every trampoline attach: fentry/fexit, fsession
	// and the tracing_multi link. Arguments are read from context slots.
	Trampoline Family = iota
	// Kprobe covers kprobe.multi, kretprobe.multi and kprobe.session.
	// Arguments are read from registers and the stack.
	Kprobe
)

func (f Family) String() string {
	switch f {
	case Trampoline:
		return "trampoline"
	case Kprobe:
		return "kprobe"
	}
	return fmt.Sprintf("Family(%d)", uint8(f))
}

// KernelVersion is a kernel release, major and minor.
type KernelVersion struct{ Major, Minor int }

// AtLeast reports whether v is major.minor or newer.
func (v KernelVersion) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Reasons a function cannot be attached; Attachable wraps them with the
// details.
var (
	ErrNotTraceable     = errors.New("not traceable")
	ErrNoPrototype      = errors.New("no BTF prototype")
	ErrSeveralAddresses = errors.New("several functions share the name")
	ErrNoAddress        = errors.New("address unknown")
	ErrVariadic         = errors.New("variable arguments")
	ErrTooManyArgs      = errors.New("too many arguments")
	ErrUnsupportedType  = errors.New("unsupported argument or return type")
	ErrNoReturn         = errors.New("never returns")
)

// noReturn holds the functions that never return on which the kernel
// refuses exit trampolines (fexit, fsession, tracing_multi): its
// noreturn_deny set in kernel/bpf/verifier.c (6.15, and stable kernels
// since). Offering them to a tracing_multi link made it fail as a whole,
// and the halving that finds them cost up to several times the link's own
// attach time with every function selected.
var noReturn = map[string]bool{
	"__ia32_sys_exit":               true,
	"__ia32_sys_exit_group":         true,
	"__x64_sys_exit":                true,
	"__x64_sys_exit_group":          true,
	"__kunit_abort":                 true,
	"kunit_try_catch_throw":         true,
	"__module_put_and_kthread_exit": true,
	"do_exit":                       true,
	"do_group_exit":                 true,
	"kthread_complete_and_exit":     true,
	"kthread_exit":                  true,
	"make_task_dead":                true,
}

// maxFuncArgs is the kernel's MAX_BPF_FUNC_ARGS: btf_distill_func_proto
// in kernel/bpf/btf.c rejects functions with more parameters.
const maxFuncArgs = 12

// Attachable reports why the function cannot be attached by the backends
// of family f on arch a running kernel v, or nil when it can.
func (p *Plan) Attachable(f Family, a Arch, v KernelVersion) error {
	if !p.Func.Traceable {
		return fmt.Errorf("%w: %s", ErrNotTraceable, p.Func.Reason)
	}
	if p.Func.IsTracepoint() {
		return p.tracepointAttachable()
	}
	switch f {
	case Trampoline:
		return p.trampolineAttachable(a, v)
	case Kprobe:
		return p.kprobeAttachable()
	}
	return fmt.Errorf("unknown argument family %s", f)
}

// trampolineAttachable follows btf_distill_func_proto (kernel/bpf/btf.c) and
// the arch trampoline generators (arch/x86/net/bpf_jit_comp.c,
// arch/arm64/net/bpf_jit_comp.c).
func (p *Plan) trampolineAttachable(a Arch, v KernelVersion) error {
	if p.Proto == nil {
		return fmt.Errorf("%w: trampolines attach by BTF ID (%s)", ErrNoPrototype, p.Func.ProtoNote)
	}
	if noReturn[p.Func.Name] {
		return fmt.Errorf("%w: the kernel refuses exit trampolines on it (a kprobe backend traces its entry)", ErrNoReturn)
	}
	if p.Func.Copies > 1 {
		// The kernel resolves the BTF name with kallsyms_lookup_name and
		// would patch only the first of the copies.
		return fmt.Errorf("%w: %d copies of %s; a trampoline would reach only one", ErrSeveralAddresses, p.Func.Copies, p.Func.Name)
	}
	if p.Variadic {
		return fmt.Errorf("%w: trampolines do not support varargs", ErrVariadic)
	}
	if len(p.Args) > maxFuncArgs {
		return fmt.Errorf("%w: %d, the kernel allows %d", ErrTooManyArgs, len(p.Args), maxFuncArgs)
	}
	if p.Ret.Class == Struct || p.Ret.Class == Float {
		return fmt.Errorf("%w: trampolines cannot return a %s", ErrUnsupportedType, p.Ret.Class)
	}
	for i, arg := range p.Args {
		switch {
		case arg.Class == Float:
			return fmt.Errorf("%w: argument %d is floating point", ErrUnsupportedType, i+1)
		case arg.Class == Struct && arg.Size > 16:
			return fmt.Errorf("%w: argument %d is a %d-byte struct by value (trampolines take at most 16)", ErrUnsupportedType, i+1, arg.Size)
		case arg.Class == Struct && !v.AtLeast(6, 1):
			return fmt.Errorf("%w: argument %d is a struct by value (trampolines take them from 6.1)", ErrUnsupportedType, i+1)
		case arg.Class == Struct && a == ARM64 && !v.AtLeast(6, 16):
			return fmt.Errorf("%w: argument %d is a struct by value (arm64 trampolines take them from 6.16)", ErrUnsupportedType, i+1)
		}
	}
	if limit := fentrySlots(a, v); p.NumSlots > limit {
		return fmt.Errorf("%w: %d argument slots, %s trampolines on %s take %d", ErrTooManyArgs, p.NumSlots, a, v, limit)
	}
	return nil
}

// tracepointAttachable checks what a tp_btf program reads of a
// tracepoint's arguments: a slot of 8 bytes each, whichever the backend
// attaching the functions.
func (p *Plan) tracepointAttachable() error {
	if p.Proto == nil {
		return fmt.Errorf("%w: tracepoints attach by their btf_trace_ typedef", ErrNoPrototype)
	}
	if len(p.Args) > maxFuncArgs {
		return fmt.Errorf("%w: %d, the kernel allows %d", ErrTooManyArgs, len(p.Args), maxFuncArgs)
	}
	for i, arg := range p.Args {
		if arg.Class == Float || arg.Class == Struct {
			return fmt.Errorf("%w: argument %d is a %s by value", ErrUnsupportedType, i+1, arg.Class)
		}
	}
	return nil
}

// fentrySlots is the number of argument slots a trampoline can save:
// x86-64 takes 6 (the argument registers) and from 6.6 up to 12 with
// stack arguments; arm64 takes 8 (x0-x7) and 12 from 6.16.
func fentrySlots(a Arch, v KernelVersion) int {
	switch {
	case a == AMD64 && v.AtLeast(6, 6):
		return maxFuncArgs
	case a == ARM64 && v.AtLeast(6, 16):
		return maxFuncArgs
	}
	return a.ArgRegs()
}

// kprobeAttachable checks what kprobe.multi needs: the addresses, or a
// name the kernel can resolve to a single address (a name with several
// symbols fails with EADDRNOTAVAIL).
func (p *Plan) kprobeAttachable() error {
	if len(p.Func.Addrs) == 0 && p.Func.Copies > 1 {
		return fmt.Errorf("%w: %d copies of %s (%s)", ErrNoAddress, p.Func.Copies, p.Func.Name, p.Func.AddrNote)
	}
	return nil
}
