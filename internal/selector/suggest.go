// SPDX-License-Identifier: Apache-2.0

package selector

import (
	"cmp"
	"slices"
)

// maxSuggestions caps the names Suggest offers.
const maxSuggestions = 3

// Suggest returns the names nearest to name, for a name that matches
// nothing: those the fewest edits away (a character inserted, deleted or
// replaced, or two adjacent ones swapped), at most maxEdits(name), in
// order, at most maxSuggestions of them. Names may repeat. A name whose
// length is too far from name's is skipped unread, and one is dropped as
// soon as it is too far, so that the tens of thousands of a kernel take
// milliseconds.
func Suggest(name string, names []string) []string {
	type near struct {
		name  string
		edits int
	}
	var found []near
	limit := maxEdits(name)
	var d editDistance
	for _, n := range names {
		if e := d.within(name, n, limit); e <= limit {
			found = append(found, near{n, e})
			limit = e // further names are not wanted
		}
	}
	slices.SortFunc(found, func(a, b near) int {
		return cmp.Or(cmp.Compare(a.edits, b.edits), cmp.Compare(a.name, b.name))
	})
	var out []string
	for _, f := range found {
		if f.edits > found[0].edits || len(out) == maxSuggestions {
			break
		}
		if len(out) == 0 || out[len(out)-1] != f.name {
			out = append(out, f.name)
		}
	}
	return out
}

// maxEdits is how many edits a suggestion may be from name: one for
// every five characters, from 1 to 3.
func maxEdits(name string) int { return min(max(len(name)/5, 1), 3) }

// editDistance computes the optimal string alignment distance: the
// Levenshtein distance, with a swap of adjacent characters one edit. It
// keeps its rows between uses.
type editDistance struct{ prev2, prev, cur []int }

// within returns the distance from a to b, or limit+1 once it is known to
// be more than limit.
func (d *editDistance) within(a, b string, limit int) int {
	if abs(len(a)-len(b)) > limit {
		return limit + 1
	}
	for _, row := range []*[]int{&d.prev2, &d.prev, &d.cur} {
		*row = slices.Grow((*row)[:0], len(b)+1)[:len(b)+1]
	}
	for j := range d.prev {
		d.prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		d.cur[0] = i
		rowMin := i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(d.prev[j]+1, d.cur[j-1]+1, d.prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, d.prev2[j-2]+1)
			}
			d.cur[j] = v
			rowMin = min(rowMin, v)
		}
		// No later row has a value below this row's least: a swap
		// from two rows up costs no less than the replacement through
		// this one.
		if rowMin > limit {
			return limit + 1
		}
		d.prev2, d.prev, d.cur = d.prev, d.cur, d.prev2
	}
	return min(d.prev[len(b)], limit+1)
}

func abs(n int) int { return max(n, -n) }
