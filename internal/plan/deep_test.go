// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"

	"github.com/cilium/ebpf/btf"
)

// fileTypes builds a struct file much like the kernel's: an operations
// table (const), an inode, a path holding a dentry that points to its
// inode, and a list node.
func fileTypes() *btf.Struct {
	u64 := &btf.Int{Name: "u64", Size: 8}
	inode := &btf.Struct{Name: "inode", Size: 600, Members: []btf.Member{{Name: "i_ino", Type: u64, Offset: 64 * 8}}}
	dentry := &btf.Struct{Name: "dentry", Size: 128, Members: []btf.Member{
		{Name: "d_flags", Type: u64},
		{Name: "d_inode", Type: &btf.Pointer{Target: inode}, Offset: 48 * 8},
	}}
	ops := &btf.Struct{Name: "file_operations", Size: 256}
	list := &btf.Struct{Name: "list_head", Size: 16}
	list.Members = []btf.Member{{Name: "next", Type: &btf.Pointer{Target: list}}, {Name: "prev", Type: &btf.Pointer{Target: list}, Offset: 64}}
	path := &btf.Struct{Name: "path", Size: 16, Members: []btf.Member{
		{Name: "mnt", Type: voidP},
		{Name: "dentry", Type: &btf.Pointer{Target: dentry}, Offset: 64},
	}}
	return &btf.Struct{Name: "file", Size: 232, Members: []btf.Member{
		{Name: "f_op", Type: &btf.Pointer{Target: &btf.Const{Type: ops}}},
		{Name: "f_inode", Type: &btf.Pointer{Target: inode}, Offset: 8 * 8},
		{Name: "f_path", Type: path, Offset: 16 * 8},
		{Name: "f_list", Type: list, Offset: 32 * 8},
		{Name: "f_owner", Type: &btf.Pointer{Target: dentry}, Offset: 240 * 8}, // past the budget below
	}}
}

func TestDeep(t *testing.T) {
	file := fileTypes()
	fn := named(long, btf.FuncParam{Name: "file", Type: &btf.Pointer{Target: file}}, btf.FuncParam{Name: "name", Type: cchar})
	type want struct {
		parent, off, budget, level int
		typ                        string
		cut                        bool
	}
	for _, tc := range []struct {
		name string
		opts Options
		want []want
	}{
		{"depth 1: the argument's struct only", Options{Depth: 1}, nil},
		{"depth 2: inode and dentry, not the ops table nor list nodes", Options{Depth: 2}, []want{
			{-1, 8, 256, 2, "inode", false},
			{-1, 24, 128, 2, "dentry", false},
		}},
		{"depth 3: and the dentry's inode", Options{Depth: 3}, []want{
			{-1, 8, 256, 2, "inode", false},
			{-1, 24, 128, 2, "dentry", false},
			{1, 48, 256, 3, "inode", false},
		}},
		{"budget: the argument's 232 and 128 bytes, 256 for the inode, not the dentry", Options{Depth: 3, CallBudget: 232 + 128 + 256 + 100}, []want{
			{-1, 8, 256, 2, "inode", false},
			{-1, 24, 0, 2, "dentry", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(fn, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Deep) != len(tc.want) {
				t.Fatalf("%d deep captures %+v, want %d", len(p.Deep), p.Deep, len(tc.want))
			}
			for i, w := range tc.want {
				d := p.Deep[i]
				got := want{d.Parent, d.Off, d.Budget, d.Level, d.Type.TypeName(), d.Cut}
				if d.Arg != 0 || got != w {
					t.Errorf("deep %d: %+v of argument %d, want %+v of argument 0", i, got, d.Arg, w)
				}
			}
		})
	}
}
