// SPDX-License-Identifier: Apache-2.0

// Package rendertest holds checks that tests of trawl's output formats
// share.
package rendertest

import (
	"bytes"
	"encoding/json"
)

// DuplicateKeys returns the keys that an object in the JSON value v, at
// any depth, has more than once: JSON readers keep one of the values, so
// a duplicate key is data lost. Invalid JSON adds an "(invalid: ...)"
// entry.
func DuplicateKeys(v json.RawMessage) []string {
	var dups []string
	var walk func(d *json.Decoder) error
	walk = func(d *json.Decoder) error {
		t, err := d.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return err
				}
				if seen[k.(string)] {
					dups = append(dups, k.(string))
				}
				seen[k.(string)] = true
				if err := walk(d); err != nil {
					return err
				}
			}
			_, err = d.Token()
		case json.Delim('['):
			for d.More() {
				if err := walk(d); err != nil {
					return err
				}
			}
			_, err = d.Token()
		}
		return err
	}
	if err := walk(json.NewDecoder(bytes.NewReader(v))); err != nil {
		return append(dups, "(invalid: "+err.Error()+")")
	}
	return dups
}
