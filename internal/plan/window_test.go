// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestWindows plans the members a task_struct's view shows, past the
// bytes copied from its start, before deeper structs and within the
// call budget; a struct copied whole needs none.
func TestWindows(t *testing.T) {
	s32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	small := &btf.Struct{Name: "small", Size: 8, Members: []btf.Member{{Name: "x", Type: long}}}
	task := &btf.Struct{Name: "task_struct", Size: 3264, Members: []btf.Member{
		{Name: "parent", Type: &btf.Pointer{Target: small}},
		{Name: "pid", Type: s32, Offset: 1264 * 8},
		{Name: "comm", Type: &btf.Array{Type: char, Index: s32, Nelems: 16}, Offset: 1752 * 8},
	}}
	fn := named(long, btf.FuncParam{Name: "p", Type: &btf.Pointer{Target: task}})
	for _, tc := range []struct {
		name string
		opts Options
		want []Window
		deep int
	}{
		{"default", Options{}, []Window{{0, 1752, 16}, {0, 1264, 4}}, 0},
		{"before deeper structs", Options{Depth: 2, CallBudget: DefaultStructBudget + 20}, []Window{{0, 1752, 16}, {0, 1264, 4}}, 1},
		{"the budget: the comm only", Options{CallBudget: DefaultStructBudget + 16}, []Window{{0, 1752, 16}}, 0},
		{"the struct copied up to them", Options{StructBudget: 2048}, nil, 0},
		{"no view at a deeper depth", Options{Depth: 3}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(fn, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Windows) != len(tc.want) {
				t.Fatalf("windows %+v, want %+v", p.Windows, tc.want)
			}
			for i, w := range tc.want {
				if p.Windows[i] != w {
					t.Errorf("window %d: %+v, want %+v", i, p.Windows[i], w)
				}
			}
			if len(p.Deep) != tc.deep {
				t.Errorf("deep %+v, want %d", p.Deep, tc.deep)
			}
		})
	}
}

// TestViewStrings plans the name a dentry's view shows, behind its
// qstr's name in an anonymous union, before deeper structs and once.
func TestViewStrings(t *testing.T) {
	uchar := &btf.Int{Name: "unsigned char", Size: 1}
	small := &btf.Struct{Name: "small", Size: 8, Members: []btf.Member{{Name: "x", Type: long}}}
	qstr := &btf.Struct{Name: "qstr", Size: 16, Members: []btf.Member{
		{Name: "hash_len", Type: long},
		{Name: "name", Type: &btf.Pointer{Target: &btf.Const{Type: uchar}}, Offset: 64},
	}}
	names := &btf.Union{Size: 16, Members: []btf.Member{{Name: "d_name", Type: &btf.Const{Type: qstr}}, {Name: "__d_name", Type: qstr}}}
	dentry := &btf.Struct{Name: "dentry", Size: 48, Members: []btf.Member{
		{Name: "d_parent", Type: &btf.Pointer{Target: small}},
		{Type: names, Offset: 64},
		{Name: "d_inode", Type: &btf.Pointer{Target: small}, Offset: 192},
	}}
	fn := named(long, btf.FuncParam{Name: "dentry", Type: &btf.Pointer{Target: dentry}})
	p, err := New(fn, Options{Depth: 2, CallBudget: 48 + DefaultStringBudget})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Member{{Parent: -1, Arg: 0, Off: 16, Budget: DefaultStringBudget}}; !slices.Equal(p.Members, want) {
		t.Errorf("members %+v, want %+v", p.Members, want)
	}
	for _, d := range p.Deep {
		if !d.Cut {
			t.Errorf("deep %+v captured, want it cut: the name comes first", d)
		}
	}
}
