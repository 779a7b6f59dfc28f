// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/trawl-dev/trawl/internal/kernel"
)

var (
	long   = &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}
	u8     = &btf.Int{Name: "unsigned char", Size: 1}
	boolT  = &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool}
	char   = &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed | btf.Char}
	sock   = &btf.Struct{Name: "sock", Size: 760}
	small  = &btf.Struct{Name: "pair", Size: 16, Members: []btf.Member{{Name: "a", Type: long}, {Name: "b", Type: long, Offset: 64}}}
	large  = &btf.Struct{Name: "triple", Size: 24, Members: []btf.Member{{Name: "a", Type: long}, {Name: "b", Type: long, Offset: 64}, {Name: "c", Type: long, Offset: 128}}}
	sizeT  = &btf.Typedef{Name: "size_t", Type: &btf.Int{Name: "unsigned long", Size: 8}}
	state  = &btf.Enum{Name: "state", Size: 4}
	cchar  = &btf.Pointer{Target: &btf.Const{Type: char}}
	sockP  = &btf.Pointer{Target: sock}
	voidP  = &btf.Pointer{Target: &btf.Void{}}
	voidT  = &btf.Void{}
	varArg = btf.FuncParam{Type: &btf.Void{}}
)

// function makes a traceable catalogue entry with the given prototype.
func function(ret btf.Type, params ...btf.Type) *kernel.Function {
	proto := &btf.FuncProto{Return: ret}
	for i, p := range params {
		if p == nil {
			proto.Params = append(proto.Params, varArg)
			continue
		}
		proto.Params = append(proto.Params, btf.FuncParam{Name: fmt.Sprintf("a%d", i), Type: p})
	}
	fn := kernel.FunctionOf(&btf.Func{Name: "f", Type: proto})
	fn.Addrs = []uint64{0xffffffff81000000}
	return fn
}

func mustPlan(t *testing.T, fn *kernel.Function) *Plan {
	t.Helper()
	p, err := New(fn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClasses(t *testing.T) {
	p := mustPlan(t, function(long, long, u8, boolT, cchar, sockP, voidP, sizeT, state, small))
	want := []struct {
		class  Class
		size   int
		budget int
		slots  int
	}{
		{Signed, 8, 0, 1}, {Unsigned, 1, 0, 1}, {Bool, 1, 0, 1}, {String, 8, DefaultStringBudget, 1},
		{PtrStruct, 8, DefaultStructBudget, 1}, {Ptr, 8, 0, 1}, {Unsigned, 8, 0, 1}, {Enum, 4, 0, 1}, {Struct, 16, 0, 2},
	}
	for i, w := range want {
		a := p.Args[i]
		if a.Class != w.class || a.Size != w.size || a.Budget != w.budget || a.NumSlots != w.slots || a.Slot != i {
			t.Errorf("arg %d: got class %s size %d budget %d slots %d at slot %d, want %+v at slot %d", i, a.Class, a.Size, a.Budget, a.NumSlots, a.Slot, w, i)
		}
	}
	if p.NumSlots != 10 || p.Ret.Class != Signed {
		t.Errorf("got %d slots, return %s; want 10, signed", p.NumSlots, p.Ret.Class)
	}
}

func TestBudgets(t *testing.T) {
	tiny := &btf.Pointer{Target: &btf.Struct{Name: "tiny", Size: 12}}
	p, err := New(function(voidT, sockP, tiny, cchar), Options{StructBudget: 64, StringBudget: 32})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{64, 12, 32} {
		if got := p.Args[i].Budget; got != want {
			t.Errorf("arg %d: budget %d, want %d", i, got, want)
		}
	}
}

func reg(n int) Loc      { return Loc{Kind: InReg, Reg: int8(n)} }
func stack(off int) Loc  { return Loc{Kind: OnStack, Offset: int32(off)} }
func indirect(l Loc) Loc { l.Indirect = true; return l }

func TestLocations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fn    *kernel.Function
		amd64 []Loc
		arm64 []Loc
	}{
		{"nine scalars", function(long, long, long, long, long, long, long, long, long, long),
			[]Loc{reg(0), reg(1), reg(2), reg(3), reg(4), reg(5), stack(8), stack(16), stack(24)},
			[]Loc{reg(0), reg(1), reg(2), reg(3), reg(4), reg(5), reg(6), reg(7), stack(0)}},
		// x86-64: the struct does not fit in the last register and goes on
		// the stack, but the next scalar still takes r9. arm64: it fits.
		{"struct after five", function(long, long, long, long, long, long, small, long),
			[]Loc{reg(0), reg(1), reg(2), reg(3), reg(4), stack(8), reg(5)},
			[]Loc{reg(0), reg(1), reg(2), reg(3), reg(4), reg(5), reg(7)}},
		// arm64: no register left for the struct, so NGRN = 8 and the next
		// scalar goes on the stack too (C.13).
		{"struct after seven", function(long, long, long, long, long, long, long, long, small, long),
			[]Loc{reg(0), reg(1), reg(2), reg(3), reg(4), reg(5), stack(8), stack(16), stack(32)},
			[]Loc{reg(0), reg(1), reg(2), reg(3), reg(4), reg(5), reg(6), stack(0), stack(16)}},
		// Over 16 bytes: on the x86-64 stack, by reference on arm64 (B.4).
		{"large struct", function(long, large, long),
			[]Loc{stack(8), reg(0)},
			[]Loc{indirect(reg(0)), reg(1)}},
		// A large struct return takes rdi for its hidden pointer on x86-64
		// and x8 on arm64.
		{"large return", function(large, long, long),
			[]Loc{reg(1), reg(2)},
			[]Loc{reg(0), reg(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, tc.fn)
			for i, a := range p.Args {
				if got := a.Kprobe[AMD64]; got != tc.amd64[i] {
					t.Errorf("amd64 arg %d: %s, want %s", i, got, tc.amd64[i])
				}
				if got := a.Kprobe[ARM64]; got != tc.arm64[i] {
					t.Errorf("arm64 arg %d: %s, want %s", i, got, tc.arm64[i])
				}
			}
		})
	}
}

func TestAttachable(t *testing.T) {
	seven := function(long, long, long, long, long, long, long, long)
	nine := function(long, long, long, long, long, long, long, long, long, long)
	thirteen := function(long, long, long, long, long, long, long, long, long, long, long, long, long, long)
	raw := &kernel.Function{Name: "g.isra.0", Traceable: true, Copies: 1, ProtoNote: "clone"}
	dup := function(long, long)
	dup.Copies, dup.Addrs = 2, []uint64{1, 2}
	hidden := function(long, long)
	hidden.Copies, hidden.Addrs = 2, nil
	exit := function(nil, long)
	exit.Name = "do_exit"
	untraceable := function(long)
	untraceable.Traceable, untraceable.Reason = false, "notrace"
	v61, v66, v612, v616 := KernelVersion{6, 1}, KernelVersion{6, 6}, KernelVersion{6, 12}, KernelVersion{6, 16}
	for _, tc := range []struct {
		name string
		fn   *kernel.Function
		b    Family
		a    Arch
		v    KernelVersion
		want error
	}{
		{"7 slots x86 6.1", seven, Trampoline, AMD64, v61, ErrTooManyArgs},
		{"7 slots x86 6.6", seven, Trampoline, AMD64, v66, nil},
		{"7 slots arm64 6.12", seven, Trampoline, ARM64, v612, nil},
		{"9 slots arm64 6.12", nine, Trampoline, ARM64, v612, ErrTooManyArgs},
		{"9 slots arm64 6.16", nine, Trampoline, ARM64, v616, nil},
		{"13 args", thirteen, Trampoline, AMD64, v616, ErrTooManyArgs},
		{"13 args kprobe", thirteen, Kprobe, AMD64, v616, nil},
		{"varargs", function(long, cchar, nil), Trampoline, AMD64, v612, ErrVariadic},
		{"varargs kprobe", function(long, cchar, nil), Kprobe, AMD64, v612, nil},
		{"large struct", function(long, large), Trampoline, AMD64, v612, ErrUnsupportedType},
		{"struct 6.0", function(long, small), Trampoline, AMD64, KernelVersion{6, 0}, ErrUnsupportedType},
		{"struct 6.1", function(long, small), Trampoline, AMD64, v61, nil},
		{"struct arm64 6.12", function(long, small), Trampoline, ARM64, v612, ErrUnsupportedType},
		{"struct return", function(small, long), Trampoline, AMD64, v612, ErrUnsupportedType},
		{"no prototype", raw, Trampoline, AMD64, v612, ErrNoPrototype},
		{"no prototype kprobe", raw, Kprobe, AMD64, v612, nil},
		{"duplicate name", dup, Trampoline, AMD64, v612, ErrSeveralAddresses},
		{"duplicate name kprobe", dup, Kprobe, AMD64, v612, nil},
		{"duplicate hidden kprobe", hidden, Kprobe, AMD64, v612, ErrNoAddress},
		{"untraceable", untraceable, Kprobe, ARM64, v612, ErrNotTraceable},
		{"no return", exit, Trampoline, AMD64, v612, ErrNoReturn},
		{"no return kprobe", exit, Kprobe, AMD64, v612, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mustPlan(t, tc.fn).Attachable(tc.b, tc.a, tc.v)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestRawPlan plans a function nothing tells the prototype of: raw
// argument registers, and the return register guessed a signed long whose
// lower half tells an error.
func TestRawPlan(t *testing.T) {
	p := mustPlan(t, &kernel.Function{Name: "g", Traceable: true, Copies: 1})
	if p.NumSlots != 0 || p.Args != nil || p.Proto != nil {
		t.Errorf("raw plan has slots %d, args %v, prototype %v", p.NumSlots, p.Args, p.Proto)
	}
	if p.Ret.Class != Signed || p.Ret.Size != 4 || !p.Ret.Guessed || kernel.TypeString(p.Ret.Type) != "long" {
		t.Errorf("raw plan returns %+v, want a guessed signed long, errors told by its lower half", p.Ret)
	}
}

// TestSizes keeps the per-argument records small: a plan of every
// function holds about 150,000 of them.
func TestSizes(t *testing.T) {
	if n := unsafe.Sizeof(Loc{}); n > 8 {
		t.Errorf("Loc is %d bytes, want at most 8", n)
	}
	if n := unsafe.Sizeof(Arg{}); n > 96 {
		t.Errorf("Arg is %d bytes, want at most 96", n)
	}
}
