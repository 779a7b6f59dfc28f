// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"
)

func TestProgressSaysAttachedAndSkipped(t *testing.T) {
	var out bytes.Buffer
	p := attachProgress(&out, time.Now().Add(-2*time.Second))
	p(3, 1, 10)
	p(4, 1, 10) // within a second of the last line: not shown
	p(8, 2, 10) // the last: shown
	want := regexp.MustCompile(`^trawl: attached 3 of 10 functions, 1 skipped \(2\.\ds\)\ntrawl: attached 8 of 10 functions, 2 skipped \(2\.\ds\)\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("got\n%s", out.String())
	}
}
