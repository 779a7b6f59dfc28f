// SPDX-License-Identifier: Apache-2.0

package render

import "testing"

func TestKindString(t *testing.T) {
	seen := map[string]bool{}
	for k := KindNone; k <= KindArray; k++ {
		s := k.String()
		if s == "" || seen[s] {
			t.Errorf("Kind %d has name %q, empty or given twice", k, s)
		}
		seen[s] = true
	}
	if got := KindErrno.String(); got != "errno" {
		t.Errorf("KindErrno.String() = %q", got)
	}
	if got := Kind(200).String(); got != "Kind(200)" {
		t.Errorf("Kind(200).String() = %q", got)
	}
}

// TestCutMarked checks that a struct the per-call budget cut is marked
// in text and JSON, members and all.
func TestCutMarked(t *testing.T) {
	v := Value{Kind: KindStruct, Name: "file", Fields: []Value{
		{Kind: KindUint, Name: "f_flags", Bits: 1},
		{Kind: KindStruct, Name: "f_inode", Flags: Cut},
	}}
	var f formatter
	if got, want := string(f.appendValue(nil, &v)), "{f_flags=1, f_inode={<cut>}}"; got != want {
		t.Errorf("text %s, want %s", got, want)
	}
	if got, want := string(appendJSONValue(nil, &v)), `{"f_flags":1,"f_inode":{"$cut":true}}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}
}
