// SPDX-License-Identifier: Apache-2.0

// Package features probes which of trawl's attach mechanisms the running
// kernel has, in the style of github.com/cilium/ebpf/features: each probe
// loads a minimal program, attaches it to bpf_fentry_test1 (a function the
// kernel keeps for exactly this, called only by BPF_PROG_TEST_RUN), detaches
// it, and remembers the answer for the life of the process.
//
// A probe returns nil when the feature works, an error wrapping
// ebpf.ErrNotSupported that says why when the kernel lacks it, and any
// other error (no privileges, no BTF) as it is.
package features

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
)

// target is the harmless kernel function every probe attaches to.
const target = "bpf_fentry_test1"

var (
	fentry         = sync.OnceValue(probeFentry)
	funcArgHelpers = sync.OnceValue(probeFuncArgHelpers)
	kprobeMulti    = sync.OnceValue(func() error { return probeKprobeMulti(false) })
	kprobeSession  = sync.OnceValue(func() error { return probeKprobeMulti(true) })
	fsession       = sync.OnceValue(probeFsession)
	tracingMulti   = sync.OnceValue(probeTracingMulti)
	rawTPCookie    = sync.OnceValue(probeRawTracepointCookie)
)

// Fentry probes for fentry/fexit programs attached through BPF links.
// Linux 5.5.
func Fentry() error { return fentry() }

// FuncArgHelpers probes for bpf_get_func_arg, bpf_get_func_arg_cnt and
// bpf_get_func_ret in fexit programs. Linux 5.17.
func FuncArgHelpers() error { return funcArgHelpers() }

// KprobeMulti probes for kprobe.multi links. Linux 5.18 with
// CONFIG_FPROBE; on arm64 6.14 (fprobe on fgraph). A kernel without them
// gives an error matching ErrKernelTooOld or ErrNoFprobe when the facts
// tell which.
func KprobeMulti() error { return kprobeMulti() }

// KprobeSession probes for kprobe.session links (one program at entry and
// exit). Linux 6.10 with CONFIG_FPROBE; on arm64 6.14. Errors as for
// KprobeMulti.
func KprobeSession() error { return kprobeSession() }

// Fsession probes for fsession programs (one trampoline program at entry
// and exit, sharing a session cookie) with the session kfuncs taking ctx.
// Linux 7.0.
func Fsession() error { return fsession() }

// TracingMulti probes for fentry.multi programs on a tracing_multi link.
// Linux 7.2, x86-64 only.
func TracingMulti() error { return tracingMulti() }

// RawTracepointCookie probes for attach cookies of raw tracepoints: a
// raw_tp program calling bpf_get_attach_cookie, attached with a cookie,
// by which one program serves many tracepoints. Linux 6.10.
func RawTracepointCookie() error { return rawTPCookie() }

// returnZero is the body of the probe programs that need no helpers.
var returnZero = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}

// loadAndAttach loads spec with cilium/ebpf, attaches it with attach and
// closes both again.
func loadAndAttach(spec *ebpf.ProgramSpec, attach func(*ebpf.Program) (link.Link, error)) error {
	prog, err := newProgram(spec)
	if err != nil {
		return fmt.Errorf("load %s program: %w", spec.AttachType, err)
	}
	defer prog.Close()
	l, err := attach(prog)
	if err != nil {
		return fmt.Errorf("attach %s program to %s: %w", spec.AttachType, target, err)
	}
	return l.Close()
}

func probeFentry() error {
	return loadAndAttach(&ebpf.ProgramSpec{
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceFEntry,
		AttachTo:     target,
		Instructions: returnZero,
	}, func(p *ebpf.Program) (link.Link, error) {
		return link.AttachTracing(link.TracingOptions{Program: p})
	})
}

func probeFuncArgHelpers() error {
	// Kernels before 5.17 reject the unknown helper calls with EINVAL.
	return probeTracingHelpers("bpf_get_func_arg/arg_cnt/ret", ebpf.AttachTraceFExit, asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetFuncArgCnt.Call(),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -8),
		asm.FnGetFuncArg.Call(),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnGetFuncRet.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	})
}

// probeTracingHelpers loads insns, which call the helpers named by what,
// as a tracing program attached as at to target, and attaches it: a
// verifier refusal says the kernel lacks the helpers in such programs.
func probeTracingHelpers(what string, at ebpf.AttachType, insns asm.Instructions) error {
	if err := Fentry(); err != nil {
		return err
	}
	err := loadAndAttach(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: at, AttachTo: target, Instructions: insns},
		func(p *ebpf.Program) (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: p})
		})
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		return fmt.Errorf("%s rejected in %s programs: %w (%w)", what, at, ebpf.ErrNotSupported, err)
	}
	return err
}

func probeKprobeMulti(session bool) error {
	at := ebpf.AttachTraceKprobeMulti
	if session {
		at = ebpf.AttachTraceKprobeSession
	}
	err := loadAndAttach(&ebpf.ProgramSpec{
		Type:         ebpf.Kprobe,
		AttachType:   at,
		Instructions: returnZero,
	}, func(p *ebpf.Program) (link.Link, error) {
		return link.KprobeMulti(p, link.KprobeMultiOptions{Symbols: []string{target}, Session: session})
	})
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return err
	}
	if session {
		return liveFacts().explain("kprobe.session", version{6, 10}, err)
	}
	return liveFacts().explain("kprobe.multi", fprobeSince, err)
}

func probeFsession() error {
	id, err := targetID()
	if err != nil {
		return err
	}
	// bpf_session_is_return(ctx) makes the verifier check that the
	// program really is a session and that the kfunc takes ctx.
	isReturn, err := rawbpf.KfuncCall("bpf_session_is_return")
	if err != nil {
		return err
	}
	prog, err := rawbpf.LoadTracing(&rawbpf.TracingSpec{
		Name:         "probe_fsession",
		AttachType:   rawbpf.AttachTraceFSession,
		AttachBTFID:  id,
		Instructions: asm.Instructions{isReturn, asm.Mov.Imm(asm.R0, 0), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	l, err := rawbpf.AttachTracing(prog, rawbpf.AttachTraceFSession, 0)
	if err != nil {
		return err
	}
	return l.Close()
}

func probeTracingMulti() error {
	id, err := targetID()
	if err != nil {
		return err
	}
	prog, err := rawbpf.LoadTracing(&rawbpf.TracingSpec{
		Name:         "probe_multi",
		AttachType:   rawbpf.AttachTraceFEntryMulti,
		Instructions: returnZero,
		License:      "GPL",
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	l, err := rawbpf.AttachTracingMulti(prog, rawbpf.AttachTraceFEntryMulti, []btf.TypeID{id}, nil)
	if err != nil {
		return err
	}
	return l.Close()
}

// quietTracepoint is the harmless tracepoint the raw_tp probe attaches
// to: it fires only when a BPF program calls bpf_trace_printk.
const quietTracepoint = "bpf_trace_printk"

func probeRawTracepointCookie() error {
	prog, err := newProgram(&ebpf.ProgramSpec{
		Type: ebpf.RawTracepoint,
		Instructions: asm.Instructions{
			asm.FnGetAttachCookie.Call(),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		// Kernels before 6.10 reject the helper in raw_tp programs.
		return fmt.Errorf("bpf_get_attach_cookie rejected in raw_tp programs: %w (%w)", ebpf.ErrNotSupported, err)
	}
	if err != nil {
		return fmt.Errorf("load raw_tp program: %w", err)
	}
	defer prog.Close()
	l, err := rawbpf.AttachRawTracepoint(prog, quietTracepoint, 1)
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("a raw tracepoint's attach cookie refused: %w (%w)", ebpf.ErrNotSupported, err)
	}
	if err != nil {
		return err
	}
	return l.Close()
}

// newProgram loads spec, a GPL program, with the process's kernel BTF
// (ebpf.NewProgram decodes it anew for each program it attaches to a
// kernel function).
func newProgram(spec *ebpf.ProgramSpec) (*ebpf.Program, error) {
	spec.License = "GPL"
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"probe": spec}},
		kernel.LoadOptions(nil))
	if err != nil {
		return nil, WithoutMemlockHint(err)
	}
	defer coll.Close()
	return coll.DetachProgram("probe"), nil
}

// memlockHint is what cilium/ebpf adds to an EPERM from loading a program
// or creating a map. It points the wrong way: trawl lifts the limit
// before it loads anything (rlimit.RemoveMemlock), and from Linux 5.11 the
// kernel charges BPF memory to the memory cgroup, not to the limit.
// Package trawl says why EPERM came instead (privileges.go).
const memlockHint = " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)"

// WithoutMemlockHint returns err with cilium/ebpf's memlock hint taken
// out of its message; it matches what err matches.
func WithoutMemlockHint(err error) error {
	if err == nil || !strings.Contains(err.Error(), memlockHint) {
		return err
	}
	return &hintless{err}
}

// hintless is an error whose message leaves memlockHint out.
type hintless struct{ err error }

func (e *hintless) Error() string { return strings.Replace(e.err.Error(), memlockHint, "", 1) }
func (e *hintless) Unwrap() error { return e.err }

// targetID returns the vmlinux BTF id of target.
func targetID() (btf.TypeID, error) {
	spec, err := kernel.KernelTypes()
	if err != nil {
		return 0, fmt.Errorf("read kernel BTF: %w", err)
	}
	var fn *btf.Func
	if err := spec.TypeByName(target, &fn); err != nil {
		return 0, fmt.Errorf("find probe target %s in kernel BTF: %w", target, err)
	}
	return spec.TypeID(fn)
}
