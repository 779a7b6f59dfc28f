// SPDX-License-Identifier: Apache-2.0

package features

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	cilium "github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// The features every backend builds on, and those older kernels lack
// that the capture program works around (see shadow_by_tid and
// task_by_helpers in internal/bpf/task.h).
var (
	kernelBTF   = sync.OnceValue(probeKernelBTF)
	ringBuffer  = sync.OnceValue(func() error { return cilium.HaveMapType(ebpf.RingBuf) })
	taskStorage = sync.OnceValue(func() error { return cilium.HaveMapType(ebpf.TaskStorage) })
	taskBTF     = sync.OnceValue(func() error { return cilium.HaveProgramHelper(ebpf.Kprobe, asm.FnGetCurrentTaskBtf) })
	kprobe      = sync.OnceValue(probeKprobe)
)

// KernelBTF probes for the kernel's BTF (/sys/kernel/btf/vmlinux), which
// trawl decodes every call with. Linux 5.4 with CONFIG_DEBUG_INFO_BTF.
// BTF from a file (kernel.UseBTF) is there, whatever the kernel has.
func KernelBTF() error {
	if kernel.External() != nil {
		return nil
	}
	return kernelBTF()
}

// RingBuffer probes for BPF ring buffers, which carry the calls to trawl.
// Linux 5.8.
func RingBuffer() error { return ringBuffer() }

// TaskStorage probes for task storage maps, which hold each task's
// shadow stack; without them the shadow stacks go in a hash map by
// thread id. Linux 5.11 (with CONFIG_BPF_LSM before 5.19).
func TaskStorage() error { return taskStorage() }

// TaskBTF probes for bpf_get_current_task_btf, which reads the current
// task's ids and name; without it, older helpers do. Linux 5.11.
func TaskBTF() error { return taskBTF() }

// Kprobe probes for kprobes created through perf events, one per
// function, with BPF programs attached. Linux 4.17.
func Kprobe() error { return kprobe() }

func probeKernelBTF() error {
	if _, err := kernel.KernelTypes(); err != nil {
		return fmt.Errorf("read kernel BTF (Linux 5.4 built with CONFIG_DEBUG_INFO_BTF): %w (%w)", ebpf.ErrNotSupported, err)
	}
	return nil
}

func probeKprobe() error {
	err := loadAndAttach(&ebpf.ProgramSpec{
		Type:         ebpf.Kprobe,
		Instructions: returnZero,
	}, func(p *ebpf.Program) (link.Link, error) {
		l, err := link.Kprobe(target, p, nil)
		if err != nil {
			return nil, liveFacts().explainKprobe(err)
		}
		return l, nil
	})
	return explainParanoid(err, readParanoid(), kernel.EffectiveCaps()&(1<<unix.CAP_SYS_ADMIN) != 0)
}

// ErrPerfParanoid is returned when the kernel opens perf events, which
// classic kprobes are made of, only for CAP_SYS_ADMIN.
var ErrPerfParanoid = errors.New("perf events need CAP_SYS_ADMIN here")

// explainParanoid says why perf_event_open refused with EACCES, when
// kernel.perf_event_paranoid is above 2: Debian's and Ubuntu's kernels
// (Debian's default is 3) then refuse perf events to all but
// CAP_SYS_ADMIN, CAP_PERFMON notwithstanding. Other errors pass as they
// are.
func explainParanoid(err error, paranoid int, sysAdmin bool) error {
	if !errors.Is(err, unix.EACCES) || paranoid <= 2 || sysAdmin {
		return err
	}
	return fmt.Errorf("%w: kernel.perf_event_paranoid is %d, at which this kernel opens perf events (classic kprobes) for CAP_SYS_ADMIN only: add CAP_SYS_ADMIN, or run sysctl kernel.perf_event_paranoid=2 (%w)", ErrPerfParanoid, paranoid, err)
}

// readParanoid returns kernel.perf_event_paranoid, 2 (the kernel's
// default) when it cannot be read.
func readParanoid() int {
	data, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		return 2
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 2
	}
	return n
}

// Base checks the features trawl cannot run without, whatever the
// backend, and says in one line what the kernel lacks.
func Base() error {
	for _, f := range []Feature{{"kernel BTF", "5.4", KernelBTF}, {"ring buffer", "5.8", RingBuffer}} {
		err := f.Probe()
		switch {
		case errors.Is(err, ebpf.ErrNotSupported):
			return fmt.Errorf("this kernel (%s) has no %s, which trawl needs (Linux %s): %w", liveFacts().release, f.Name, f.Since, err)
		case err != nil:
			return fmt.Errorf("probe for %s: %w", f.Name, err)
		}
	}
	return nil
}

var globalPtrArgs = sync.OnceValue(probeGlobalPtrArgs)

// GlobalPtrArgs probes for pointer arguments of global BPF functions,
// which the verifier checks once, apart from their callers. Linux 5.12;
// before, trawl makes such functions static (checked at each call).
func GlobalPtrArgs() error { return globalPtrArgs() }

func probeGlobalPtrArgs() error {
	u64 := &btf.Int{Name: "u64", Size: 8}
	main := &btf.Func{Name: "probe_main", Linkage: btf.GlobalFunc, Type: &btf.FuncProto{
		Return: u64, Params: []btf.FuncParam{{Name: "ctx", Type: &btf.Pointer{Target: &btf.Void{}}}}}}
	global := &btf.Func{Name: "probe_global", Linkage: btf.GlobalFunc, Type: &btf.FuncProto{
		Return: u64, Params: []btf.FuncParam{{Name: "p", Type: &btf.Pointer{Target: u64}}}}}
	insns := asm.Instructions{
		btf.WithFuncMetadata(asm.Mov.Imm(asm.R1, 0).WithSymbol("probe_main"), main),
		asm.StoreMem(asm.RFP, -8, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -8),
		asm.Call.Label("probe_global"),
		asm.Return(),
		btf.WithFuncMetadata(asm.Mov.Imm(asm.R0, 0).WithSymbol("probe_global"), global),
		asm.Return(),
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Kprobe, Instructions: insns, License: "GPL"})
	err = WithoutMemlockHint(err)
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		return fmt.Errorf("a global function with a pointer argument: %w (%w)", ebpf.ErrNotSupported, err)
	}
	if err != nil {
		return fmt.Errorf("load a program with a global function: %w", err)
	}
	return prog.Close()
}

var (
	tracingAncestorCgroup = sync.OnceValue(probeTracingAncestorCgroup)
	kprobeAncestorCgroup  = sync.OnceValue(func() error {
		return cilium.HaveProgramHelper(ebpf.Kprobe, asm.FnGetCurrentAncestorCgroupId)
	})
)

// AncestorCgroup probes for bpf_get_current_ancestor_cgroup_id in fentry
// programs, or in kprobe programs (kprobe set), which --cgroup needs to
// take a cgroup's descendants in. Linux 5.7 for fentry, 5.11 for kprobes
// (5.10 has it in neither).
func AncestorCgroup(kprobe bool) error {
	if kprobe {
		return kprobeAncestorCgroup()
	}
	return tracingAncestorCgroup()
}

func probeTracingAncestorCgroup() error {
	return probeTracingHelpers("bpf_get_current_ancestor_cgroup_id", ebpf.AttachTraceFEntry, asm.Instructions{
		asm.Mov.Imm(asm.R1, 0),
		asm.FnGetCurrentAncestorCgroupId.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	})
}
