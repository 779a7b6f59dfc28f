// SPDX-License-Identifier: Apache-2.0

package call

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
