// SPDX-License-Identifier: Apache-2.0

// Package bedtest proves the test bed on every kernel: BPF programs load,
// attach and fire, loopback networking works and kernel BTF is readable.
package bedtest

import (
	"errors"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/kernel/features"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
	"github.com/trawl-dev/trawl/internal/workload"
)

// syscallFunc is the kernel function behind getpgid(2) on this arch.
func syscallFunc() string {
	if runtime.GOARCH == "arm64" {
		return "__arm64_sys_getpgid"
	}
	return "__x64_sys_getpgid"
}

// counter loads a program of the given kind that counts its runs in an
// array map.
func counter(t *testing.T, spec *ebpf.ProgramSpec) (*ebpf.Program, *ebpf.Map) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatalf("create map: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	spec.License = "GPL"
	spec.Instructions = asm.Instructions{
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) {
			t.Skipf("kernel %s cannot load this program: %v", guest.Kernel(), err)
		}
		t.Fatalf("load program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog, m
}

// fire calls getpgid n times and returns how often the program ran.
func fire(t *testing.T, m *ebpf.Map, n int) uint64 {
	t.Helper()
	for i := 0; i < n; i++ {
		unix.Getpgid(0)
	}
	var count uint64
	if err := m.Lookup(uint32(0), &count); err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return count
}

func TestFentryFires(t *testing.T) {
	guest.Require(t)
	if err := features.Fentry(); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel %s: %v", guest.Kernel(), err) // arm64 before 6.0
	}
	prog, m := counter(t, &ebpf.ProgramSpec{
		Type:       ebpf.Tracing,
		AttachType: ebpf.AttachTraceFEntry,
		AttachTo:   syscallFunc(),
	})
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		t.Fatalf("attach fentry to %s: %v", syscallFunc(), err)
	}
	defer l.Close()
	if got := fire(t, m, 10); got < 10 {
		t.Fatalf("fentry program ran %d times for 10 calls", got)
	}
}

func TestKprobeMultiFires(t *testing.T) {
	guest.Require(t)
	prog, m := counter(t, &ebpf.ProgramSpec{
		Type:       ebpf.Kprobe,
		AttachType: ebpf.AttachTraceKprobeMulti,
	})
	l, err := link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: []string{syscallFunc()}})
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel %s has no kprobe.multi links: %v", guest.Kernel(), err)
	}
	if err != nil {
		t.Fatalf("attach kprobe.multi to %s: %v", syscallFunc(), err)
	}
	defer l.Close()
	if got := fire(t, m, 10); got < 10 {
		t.Fatalf("kprobe.multi program ran %d times for 10 calls", got)
	}
}

// TestLoopbackTCP runs the test workload's loopback TCP exchange, which
// the demo, the bench and the tests trace.
func TestLoopbackTCP(t *testing.T) {
	guest.Require(t)
	if err := workload.Loopback(); err != nil {
		t.Fatal(err)
	}
}

func TestKernelBTF(t *testing.T) {
	guest.Require(t)
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("load kernel BTF: %v", err)
	}
	var fn *btf.Func
	if err := spec.TypeByName(syscallFunc(), &fn); err != nil {
		t.Fatalf("find %s in kernel BTF: %v", syscallFunc(), err)
	}
	var task *btf.Struct
	if err := spec.TypeByName("task_struct", &task); err != nil {
		t.Fatalf("find struct task_struct in kernel BTF: %v", err)
	}
	if task.Size < 1000 {
		t.Fatalf("struct task_struct is %d bytes, want a real one", task.Size)
	}
}
