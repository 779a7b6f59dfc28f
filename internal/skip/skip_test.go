// SPDX-License-Identifier: Apache-2.0

package skip

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestSummary(t *testing.T) {
	r := Reasons{}
	r.Add("busy", "f")
	r.Add("not traceable", "a", "b")
	r.Add("address unknown", "c")
	r.Merge(Reasons{"busy": {"g"}, "no prototype": {"d", "e", "h"}})
	if n := r.Count(); n != 8 {
		t.Errorf("Count = %d, want 8", n)
	}
	want := []string{
		"3 no prototype (e.g. d, e)",
		"2 busy (e.g. f, g)",
		"2 not traceable (e.g. a, b)",
		"1 address unknown (e.g. c)",
	}
	if got := r.Summary(2); !slices.Equal(got, want) {
		t.Errorf("Summary(2) =\n%q\nwant\n%q", got, want)
	}
	if got := r.Summary(0); got[0] != "3 no prototype" {
		t.Errorf("Summary(0)[0] = %q, want no examples", got[0])
	}
	if got := (Reasons{}).Summary(1); got != nil {
		t.Errorf("Summary of nothing = %q", got)
	}
}

func TestReason(t *testing.T) {
	sentinel := errors.New("not traceable")
	for _, c := range []struct {
		err  error
		want string
	}{
		{sentinel, "not traceable"},
		{fmt.Errorf("%w: recursion risk", sentinel), "not traceable"},
		{fmt.Errorf("f: argument 1 (x): %w", fmt.Errorf("%w: struct", sentinel)), "not traceable"},
		{errors.New("plain: text"), "plain: text"},
	} {
		if got := Reason(c.err); got != c.want {
			t.Errorf("Reason(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
