// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"encoding/json"
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

// TestShortForm checks that a struct that reads as one string shows it
// in text, and in JSON beside its members, which read back the same.
func TestShortForm(t *testing.T) {
	v := call.Value{Kind: call.KindStruct, Name: "p", Str: "tr\x1bwl[42]", Fields: []call.Value{
		{Kind: call.KindString, Name: "comm", Str: "tr\x1bwl"},
		{Kind: call.KindInt, Name: "pid", Bits: 42},
	}}
	var f formatter
	if got, want := string(f.appendValue(nil, &v)), `tr\x1bwl[42]`; got != want {
		t.Errorf("text %s, want %s", got, want)
	}
	js := appendJSONValue(nil, &v)
	if want := `{"comm":"tr\u001bwl","pid":42,"$short":"tr\u001bwl[42]"}`; string(js) != want {
		t.Errorf("JSON %s, want %s", js, want)
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	back, err := readValue(d, "p")
	if err != nil {
		t.Fatal(err)
	}
	if again := appendJSONValue(nil, &back); back.Str != v.Str || string(again) != string(js) {
		t.Errorf("read back %q, written again %s", back.Str, again)
	}
}
