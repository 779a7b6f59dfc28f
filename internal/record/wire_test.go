// SPDX-License-Identifier: Apache-2.0

package record

import (
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

func TestInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  []uint16
		want bool
	}{
		{"no slots", nil, true},
		{"registers in order", []uint16{0, 1, 2}, true},
		{"a struct on the stack, then registers", []uint16{0, srcStack | 8, srcStack | 16, 1}, false},
		{"registers out of order", []uint16{1, 0}, false},
		{"more slots than registers", []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8}, false},
	} {
		var w bpf.CapturePlan
		w.NrSlots = uint8(len(tc.src))
		copy(w.Src[:], tc.src)
		if got := inOrder(w, plan.ARM64); got != tc.want {
			t.Errorf("%s: inOrder %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestWireDeep checks that Deep captures follow the structs captured
// before them, a string after them, and point into their parent's bytes.
func TestWireDeep(t *testing.T) {
	if plan.MaxCaptures != MaxCaps || plan.DefaultCallBudget != int(bpf.CaptureLimitMAX_DATA) {
		t.Fatalf("plan.MaxCaptures %d, plan.DefaultCallBudget %d: want the program's MAX_CAPS %d and MAX_DATA %d",
			plan.MaxCaptures, plan.DefaultCallBudget, MaxCaps, bpf.CaptureLimitMAX_DATA)
	}
	u64 := &btf.Int{Name: "u64", Size: 8}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Char}
	inode := &btf.Struct{Name: "inode", Size: 16, Members: []btf.Member{{Name: "i_ino", Type: u64}}}
	dentry := &btf.Struct{Name: "dentry", Size: 40, Members: []btf.Member{{Name: "d_inode", Type: &btf.Pointer{Target: inode}, Offset: 32 * 8}}}
	file := &btf.Struct{Name: "file", Size: 24, Members: []btf.Member{{Name: "f_dentry", Type: &btf.Pointer{Target: dentry}, Offset: 8 * 8}}}
	fn := &btf.Func{Name: "f", Type: &btf.FuncProto{Return: u64, Params: []btf.FuncParam{
		{Name: "name", Type: &btf.Pointer{Target: char}},
		{Name: "file", Type: &btf.Pointer{Target: file}},
	}}}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{Depth: 3})
	if err != nil {
		t.Fatal(err)
	}
	w, err := Wire(p, plan.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	type capture struct {
		slot, kind uint8
		size, off  uint16
	}
	want := []capture{
		{1, capMem, 24, 0},
		{0, capDeep, 40, 8},
		{1, capDeep, 16, 24 + 32},
		{0, capStr, plan.DefaultStringBudget, 0},
	}
	if w.NrCaps != uint8(len(want)) || w.Flags&planDeep == 0 {
		t.Fatalf("%d captures, flags %#x: want %d, PLAN_DEEP", w.NrCaps, w.Flags, len(want))
	}
	for i, c := range want {
		got := w.Caps[i]
		if (capture{got.Slot, got.Kind, got.Size, got.Off}) != c {
			t.Errorf("capture %d: %+v, want %+v", i, got, c)
		}
	}
}

// TestWireRaw wires a function without a prototype: the argument
// registers raw, and the return register's lower half, which --errors
// takes for an errno from -4095 to -1.
func TestWireRaw(t *testing.T) {
	p, err := plan.New(&kernel.Function{Name: "do_sys_openat2", Traceable: true, Copies: 1}, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := Wire(p, plan.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	if w.NrSlots != 8 || w.ErrKind != errNeg || w.RetSize != 4 || !CanFail(p) {
		t.Errorf("raw plan wired with %d slots, error kind %d, return size %d; want 8, %d, 4", w.NrSlots, w.ErrKind, w.RetSize, errNeg)
	}
}

// TestWireMembers wires the string behind a struct's char * member and
// the path of a struct file's f_path: after the structs, each pointing
// into its struct's capture, the argument's string last.
func TestWireMembers(t *testing.T) {
	u64 := &btf.Int{Name: "u64", Size: 8}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Char}
	charP := &btf.Pointer{Target: char}
	path := &btf.Struct{Name: "path", Size: 16, Members: []btf.Member{
		{Name: "mnt", Type: &btf.Pointer{Target: &btf.Void{}}},
		{Name: "dentry", Type: &btf.Pointer{Target: &btf.Void{}}, Offset: 64},
	}}
	filename := &btf.Struct{Name: "filename", Size: 16, Members: []btf.Member{{Name: "name", Type: charP}, {Name: "refcnt", Type: u64, Offset: 64}}}
	file := &btf.Struct{Name: "file", Size: 40, Members: []btf.Member{{Name: "f_mode", Type: u64}, {Name: "f_path", Type: path, Offset: 16 * 8}}}
	fn := &btf.Func{Name: "f", Type: &btf.FuncProto{Return: u64, Params: []btf.FuncParam{
		{Name: "name", Type: charP},
		{Name: "pathname", Type: &btf.Pointer{Target: filename}},
		{Name: "file", Type: &btf.Pointer{Target: file}},
	}}}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := Wire(p, plan.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	type capture struct {
		slot, kind uint8
		size, off  uint16
	}
	want := []capture{
		{1, capMem, 16, 0},
		{2, capMem, 40, 0},
		{1, capPath, plan.PathBudget, 16 + 16},
		{0, capDeepStr, plan.DefaultStringBudget, 0},
		{0, capStr, plan.DefaultStringBudget, 0},
	}
	if w.NrCaps != uint8(len(want)) || w.Flags&planDeep == 0 {
		t.Fatalf("%d captures, flags %#x: want %d, PLAN_DEEP", w.NrCaps, w.Flags, len(want))
	}
	for i, c := range want {
		got := w.Caps[i]
		if (capture{got.Slot, got.Kind, got.Size, got.Off}) != c {
			t.Errorf("capture %d: %+v, want %+v", i, got, c)
		}
	}
}

// TestWireWindows encodes the windows of a task_struct argument, its
// comm and pid past the bytes copied from its start, as captures of
// the argument's memory from their offsets, after the struct.
func TestWireWindows(t *testing.T) {
	s32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Char}
	task := &btf.Struct{Name: "task_struct", Size: 3264, Members: []btf.Member{
		{Name: "__state", Type: s32},
		{Name: "pid", Type: s32, Offset: 1264 * 8},
		{Name: "comm", Type: &btf.Array{Type: char, Index: s32, Nelems: 16}, Offset: 1752 * 8},
	}}
	fn := &btf.Func{Name: "f", Type: &btf.FuncProto{Return: s32, Params: []btf.FuncParam{
		{Name: "flags", Type: s32},
		{Name: "p", Type: &btf.Pointer{Target: task}},
	}}}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := Wire(p, plan.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	type capture struct {
		slot, kind uint8
		size, off  uint16
	}
	want := []capture{
		{1, capMem, plan.DefaultStructBudget, 0},
		{1, capMem, 16, 1752},
		{1, capMem, 4, 1264},
	}
	if w.NrCaps != uint8(len(want)) || w.Flags&planDeep == 0 {
		t.Fatalf("%d captures, flags %#x: want %d, PLAN_DEEP", w.NrCaps, w.Flags, len(want))
	}
	for i, c := range want {
		got := w.Caps[i]
		if (capture{got.Slot, got.Kind, got.Size, got.Off}) != c {
			t.Errorf("capture %d: %+v, want %+v", i, got, c)
		}
	}
}
