// SPDX-License-Identifier: Apache-2.0

// Package skip records what a trace leaves out and why: functions, or for
// the kprobe backends addresses, listed by reason.
package skip

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Reasons lists the items skipped, by reason.
type Reasons map[string][]string

// Add lists items as skipped for reason.
func (r Reasons) Add(reason string, items ...string) {
	r[reason] = append(r[reason], items...)
}

// Merge adds every item of o to r.
func (r Reasons) Merge(o Reasons) {
	for reason, items := range o {
		r.Add(reason, items...)
	}
}

// Count returns the number of items skipped.
func (r Reasons) Count() int {
	n := 0
	for _, items := range r {
		n += len(items)
	}
	return n
}

// Sorted returns the reasons, those with most items first, then by name.
func (r Reasons) Sorted() []string {
	reasons := make([]string, 0, len(r))
	for reason := range r {
		reasons = append(reasons, reason)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(r[b]), len(r[a])), strings.Compare(a, b))
	})
	return reasons
}

// Summary returns one line per reason, in the order of Sorted: the count,
// the reason and up to examples of its items, as in
// "3 busy (EBUSY) (e.g. a, b)".
func (r Reasons) Summary(examples int) []string {
	var lines []string
	for _, reason := range r.Sorted() {
		items := r[reason]
		line := fmt.Sprintf("%d %s", len(items), reason)
		if n := min(examples, len(items)); n > 0 {
			line += " (e.g. " + strings.Join(items[:n], ", ") + ")"
		}
		lines = append(lines, line)
	}
	return lines
}

// Reason returns the reason an error gives for skipping: the text of the
// last error of its chain, which the errors that say why a function
// cannot be traced wrap with %w after their details ("not traceable"
// for "not traceable: recursion risk").
func Reason(err error) string {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err.Error()
		}
		err = inner
	}
}
