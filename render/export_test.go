// SPDX-License-Identifier: Apache-2.0

package render

import "fmt"

// AppendMicros lets the tests of package render_test write times as the
// Chrome JSON renderer does.
var AppendMicros = appendMicros

// FillInternedStrings fills p's table of interned string values with
// strings no call refers to.
func FillInternedStrings(p *PerfettoProto) {
	for i := range maxInternedStrings {
		p.strs.iids[fmt.Sprint("filler", i)] = uint64(i + 1)
	}
}

// Interned reports whether p interned the string value s.
func Interned(p *PerfettoProto, s string) bool {
	_, ok := p.strs.iids[s]
	return ok
}
