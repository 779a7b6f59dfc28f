// SPDX-License-Identifier: Apache-2.0

package rawbpf_test

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// fullSupport is the test bed kernel that must have every feature here.
const fullSupport = "amd64-7.3"

// unsupported skips the test when err says the kernel lacks the feature,
// except on the kernel that must have it.
func unsupported(t *testing.T, what string, err error) {
	t.Helper()
	if errors.Is(err, ebpf.ErrNotSupported) && guest.Kernel() != fullSupport {
		t.Skipf("kernel %s has no %s: %v", guest.Kernel(), what, err)
	}
}

func kfunc(t *testing.T, name string) asm.Instruction {
	t.Helper()
	ins, err := rawbpf.KfuncCall(name)
	unsupported(t, name, err)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func funcID(t *testing.T, name string) btf.TypeID {
	t.Helper()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	var fn *btf.Func
	if err := spec.TypeByName(name, &fn); err != nil {
		t.Fatalf("find %s in kernel BTF: %v", name, err)
	}
	id, err := spec.TypeID(fn)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// slots returns a one-entry array map of n u64 slots and the instructions
// that leave a pointer to them in R9, or exit.
func slots(t *testing.T, n uint32) (*ebpf.Map, asm.Instructions) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8 * n, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, asm.Instructions{
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Reg(asm.R9, asm.R0),
	}
}

func readSlots(t *testing.T, m *ebpf.Map, n int) []uint64 {
	t.Helper()
	got := make([]uint64, n)
	if err := m.Lookup(uint32(0), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// trigger calls bpf_fentry_test1..10 in the kernel: BPF_PROG_TEST_RUN of
// a tracing program does that.
func trigger(t *testing.T, prog *ebpf.Program) {
	t.Helper()
	if _, err := prog.Run(nil); err != nil {
		t.Fatalf("trigger bpf_fentry_test*: %v", err)
	}
}

const sessionCookie = 0x5e55101

// TestFsession runs one fsession program at entry and exit of
// bpf_fentry_test1(1), which returns 2, and checks the session cookie
// written at entry is read at exit.
func TestFsession(t *testing.T) {
	guest.Require(t)
	m, lookup := slots(t, 6)
	// Slots: 0 entries, 1 exits, 2 session cookie at exit, 3 attach
	// cookie, 4 arg 0, 5 return value.
	insns := append(asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}, lookup...) // R6: ctx
	insns = append(insns,
		asm.Mov.Reg(asm.R1, asm.R6),
		kfunc(t, "bpf_session_cookie"),
		asm.Mov.Reg(asm.R7, asm.R0), // *u64 session cookie
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnGetAttachCookie.Call(),
		asm.StoreMem(asm.R9, 24, asm.R0, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.R9),
		asm.Add.Imm(asm.R3, 32),
		asm.FnGetFuncArg.Call(),
		asm.Mov.Reg(asm.R1, asm.R6),
		kfunc(t, "bpf_session_is_return"),
		asm.JNE.Imm(asm.R0, 0, "return"),
		// entry
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R9, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, sessionCookie),
		asm.StoreMem(asm.R7, 0, asm.R1, asm.DWord),
		asm.Ja.Label("exit"),
		// return
		asm.Mov.Reg(asm.R8, asm.R9).WithSymbol("return"),
		asm.Add.Imm(asm.R8, 8),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R8, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R7, 0, asm.DWord),
		asm.StoreMem(asm.R9, 16, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.R9),
		asm.Add.Imm(asm.R2, 40),
		asm.FnGetFuncRet.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	)
	prog, err := rawbpf.LoadTracing(&rawbpf.TracingSpec{
		Name:         "fsession_test",
		AttachType:   rawbpf.AttachTraceFSession,
		AttachBTFID:  funcID(t, "bpf_fentry_test1"),
		Instructions: insns,
		License:      "GPL",
	})
	unsupported(t, "fsession", err)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	l, err := rawbpf.AttachTracing(prog, rawbpf.AttachTraceFSession, 42)
	unsupported(t, "fsession", err)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if info, err := l.Info(); err != nil {
		t.Fatal(err)
	} else if info.Type != link.TracingType {
		t.Errorf("link type %d, want tracing (%d)", info.Type, link.TracingType)
	}
	trigger(t, prog)
	got := readSlots(t, m, 6)
	want := []uint64{1, 1, sessionCookie, 42, 1, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("slots (entries, exits, session cookie, attach cookie, arg0, ret) = %#x, want %#x", got, want)
		}
	}
}

// TestTracingMulti attaches one fentry.multi program to three functions
// with distinct cookies and checks that each cookie is seen with its
// function's argument count and first argument.
func TestTracingMulti(t *testing.T) {
	guest.Require(t)
	seen, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer seen.Close()
	// seen[cookie] = arg count << 32 | arg 0
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetAttachCookie.Call(),
		asm.StoreMem(asm.RFP, -8, asm.R0, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnGetFuncArgCnt.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.LSh.Imm(asm.R7, 32),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -16),
		asm.FnGetFuncArg.Call(),
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.DWord),
		asm.Or.Reg(asm.R7, asm.R1),
		asm.StoreMem(asm.RFP, -16, asm.R7, asm.DWord),
		asm.LoadMapPtr(asm.R1, seen.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -16),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}
	prog, err := rawbpf.LoadTracing(&rawbpf.TracingSpec{
		Name:         "multi_test",
		AttachType:   rawbpf.AttachTraceFEntryMulti,
		Instructions: insns,
		License:      "GPL",
	})
	unsupported(t, "tracing_multi", err)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	ids := []btf.TypeID{funcID(t, "bpf_fentry_test1"), funcID(t, "bpf_fentry_test2"), funcID(t, "bpf_fentry_test3")}
	cookies := []uint64{101, 102, 103}
	l, err := rawbpf.AttachTracingMulti(prog, rawbpf.AttachTraceFEntryMulti, ids, cookies)
	unsupported(t, "tracing_multi", err)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if info, err := l.Info(); err != nil {
		t.Fatal(err)
	} else if info.Type != 15 {
		t.Errorf("link type %d, want tracing_multi (15)", info.Type)
	}
	trigger(t, prog)
	// bpf_fentry_test1(1), bpf_fentry_test2(2, 3), bpf_fentry_test3(4, 5, 6)
	want := map[uint64]uint64{101: 1<<32 | 1, 102: 2<<32 | 2, 103: 3<<32 | 4}
	for cookie, w := range want {
		var got uint64
		if err := seen.Lookup(cookie, &got); err != nil {
			t.Errorf("cookie %d not seen: %v", cookie, err)
		} else if got != w {
			t.Errorf("cookie %d: arg count<<32|arg0 = %#x, want %#x", cookie, got, w)
		}
	}
	var k, v uint64
	count := 0
	for it := seen.Iterate(); it.Next(&k, &v); {
		count++
	}
	if count != len(want) {
		t.Errorf("saw %d cookies, want %d", count, len(want))
	}
}
