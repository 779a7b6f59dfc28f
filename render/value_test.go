// SPDX-License-Identifier: Apache-2.0

package render

import (
	"testing"

	"github.com/trawl-dev/trawl/call"
)

// TestCutMarked checks that a struct the per-call budget cut is marked
// in text and JSON, members and all.
func TestCutMarked(t *testing.T) {
	v := call.Value{Kind: call.KindStruct, Name: "file", Fields: []call.Value{
		{Kind: call.KindUint, Name: "f_flags", Bits: 1},
		{Kind: call.KindStruct, Name: "f_inode", Flags: call.Cut},
	}}
	var f formatter
	if got, want := string(f.appendValue(nil, &v)), "{f_flags=1, f_inode={<cut>}}"; got != want {
		t.Errorf("text %s, want %s", got, want)
	}
	if got, want := string(appendJSONValue(nil, &v)), `{"f_flags":1,"f_inode":{"$cut":true}}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}
}
