// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/trawl-dev/trawl/internal/kernel"
)

// named makes a function f whose parameters have the given names and types.
func named(ret btf.Type, params ...btf.FuncParam) *kernel.Function {
	fn := function(ret)
	fn.Proto().Type.(*btf.FuncProto).Params = params
	return fn
}

func TestBufferPairs(t *testing.T) {
	user := &btf.Pointer{Target: &btf.TypeTag{Value: "user", Type: &btf.Const{Type: char}}}
	charP := &btf.Pointer{Target: char}
	u8P := &btf.Pointer{Target: &btf.Typedef{Name: "u8", Type: u8}}
	intT := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	for _, tc := range []struct {
		name   string
		fn     *kernel.Function
		opts   Options
		arg    int
		want   *SizedBuffer
		budget int
	}{
		{"write: const buf, count at entry", named(long, btf.FuncParam{Name: "file", Type: sockP}, btf.FuncParam{Name: "buf", Type: user}, btf.FuncParam{Name: "count", Type: sizeT}),
			Options{}, 1, &SizedBuffer{LenArg: 2}, DefaultBufferBudget},
		{"read: filled buf, ret is the length", named(long, btf.FuncParam{Name: "buf", Type: charP}, btf.FuncParam{Name: "count", Type: sizeT}),
			Options{BufferBudget: 16}, 0, &SizedBuffer{LenArg: 1, AtExit: true, RetLen: true}, 16},
		{"filled u8 buffer, void return", named(voidT, btf.FuncParam{Name: "len", Type: intT}, btf.FuncParam{Name: "data", Type: u8P}),
			Options{}, 1, &SizedBuffer{LenArg: 0, AtExit: true}, DefaultBufferBudget},
		{"no size argument: a string", named(long, btf.FuncParam{Name: "buf", Type: charP}, btf.FuncParam{Name: "flags", Type: sizeT}),
			Options{}, 0, nil, DefaultStringBudget},
		{"explicit", named(long, btf.FuncParam{Name: "p", Type: voidP}, btf.FuncParam{Name: "n", Type: sizeT}),
			Options{Buffers: []BufferSpec{{Func: "f", Arg: "p", SizeArg: "n"}}}, 0, &SizedBuffer{LenArg: 1, AtExit: true, RetLen: true}, DefaultBufferBudget},
		{"explicit, another function", named(long, btf.FuncParam{Name: "p", Type: voidP}, btf.FuncParam{Name: "n", Type: sizeT}),
			Options{Buffers: []BufferSpec{{Func: "g", Arg: "p", SizeArg: "n"}}}, 0, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.fn, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			a := p.Args[tc.arg]
			if (a.Buffer == nil) != (tc.want == nil) || a.Buffer != nil && *a.Buffer != *tc.want {
				t.Errorf("buffer %+v, want %+v", a.Buffer, tc.want)
			}
			if wantClass := Buffer; tc.want != nil && a.Class != wantClass || a.Budget != tc.budget {
				t.Errorf("class %s budget %d, want budget %d", a.Class, a.Budget, tc.budget)
			}
		})
	}
}

func TestBufferSpecs(t *testing.T) {
	fn := named(long, btf.FuncParam{Name: "p", Type: voidP}, btf.FuncParam{Name: "n", Type: sizeT}, btf.FuncParam{Name: "sk", Type: sockP})
	for _, spec := range []BufferSpec{{"f", "q", "n"}, {"f", "p", "q"}, {"f", "sk", "n"}, {"f", "p", "sk"}} {
		if _, err := New(fn, Options{Buffers: []BufferSpec{spec}}); err == nil {
			t.Errorf("%+v: no error", spec)
		}
	}
	for _, s := range []string{"f:p", "f=p:n", ":p=n", "f:p=", "f:=n"} {
		if _, err := ParseBufferSpec(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
	if got, err := ParseBufferSpec("vfs_write:buf=count"); err != nil || got != (BufferSpec{"vfs_write", "buf", "count"}) {
		t.Errorf("got %+v, %v", got, err)
	}
}
