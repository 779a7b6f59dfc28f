// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestMembers plans the strings behind char * members (const or not, and
// a qstr's unsigned char * name) and a struct file's path, within the
// call budget, and not unsigned char * members that are data.
func TestMembers(t *testing.T) {
	uchar := &btf.Int{Name: "unsigned char", Size: 1}
	qstr := &btf.Struct{Name: "qstr", Size: 16, Members: []btf.Member{
		{Name: "hash_len", Type: long},
		{Name: "name", Type: &btf.Pointer{Target: &btf.Const{Type: uchar}}, Offset: 64},
	}}
	s := &btf.Struct{Name: "s", Size: 40, Members: []btf.Member{
		{Name: "name", Type: cchar},
		{Name: "head", Type: &btf.Pointer{Target: uchar}, Offset: 64},
		{Name: "d_name", Type: qstr, Offset: 128},
		{Name: "past", Type: cchar, Offset: 32 * 8},
	}}
	fn := named(long, btf.FuncParam{Name: "file", Type: &btf.Pointer{Target: fileTypes()}}, btf.FuncParam{Name: "s", Type: &btf.Pointer{Target: s}})
	type want struct {
		parent, arg, off, budget int
		path                     bool
	}
	for _, tc := range []struct {
		name string
		opts Options
		want []want
	}{
		{"default", Options{}, []want{
			{-1, 0, 16, PathBudget, true},
			{-1, 1, 0, DefaultStringBudget, false},
			{-1, 1, 24, DefaultStringBudget, false},
			{-1, 1, 32, DefaultStringBudget, false},
		}},
		{"the budget: the path and one string", Options{StructBudget: 32, CallBudget: 32 + 32 + PathBudget + 20}, []want{
			{-1, 0, 16, PathBudget, true},
			{-1, 1, 0, 20, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(fn, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Members) != len(tc.want) {
				t.Fatalf("members %+v, want %+v", p.Members, tc.want)
			}
			for i, w := range tc.want {
				m := p.Members[i]
				if got := (want{m.Parent, m.Arg, m.Off, m.Budget, m.Path}); got != w {
					t.Errorf("member %d: %+v, want %+v", i, got, w)
				}
			}
		})
	}
}
