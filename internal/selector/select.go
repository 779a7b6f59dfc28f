// SPDX-License-Identifier: Apache-2.0

package selector

import (
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// Selection is the outcome of a set of patterns.
type Selection struct {
	// Selected are the functions to trace, in catalogue order.
	Selected []*kernel.Function
	// Excluded are the functions an including pattern matched but that are
	// not selected, with the reason.
	Excluded []Exclusion
}

// Exclusion is a matched function left out, and why.
type Exclusion struct {
	Func   *kernel.Function
	Reason string
}

// Select applies patterns to the catalogue (see the package doc for the
// syntax and how patterns combine).
func Select(c *kernel.Catalogue, patterns []string) (*Selection, error) {
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%w: no pattern given", ErrBadPattern)
	}
	var includes, excludes []*Pattern
	var errs []error
	for _, text := range patterns {
		p, err := Parse(text)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p.Exclude {
			excludes = append(excludes, p)
		} else {
			includes = append(includes, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	matched := make([]int, len(includes))
	selected := make([]int, len(includes))
	firstReason := make([]string, len(includes))
	sel := &Selection{}
	lists := [][]kernel.Function{c.Functions()}
	if slices.ContainsFunc(includes, func(p *Pattern) bool { return p.Tracepoint }) {
		lists = append(lists, c.Tracepoints())
	}
	for fn := range allOf(lists) {
		var hits []int
		for j, p := range includes {
			if p.Match(fn) {
				hits = append(hits, j)
				matched[j]++
			}
		}
		if len(includes) > 0 && len(hits) == 0 {
			continue
		}
		reason := exclusionReason(fn, excludes)
		if reason != "" {
			sel.Excluded = append(sel.Excluded, Exclusion{fn, reason})
			for _, j := range hits {
				if firstReason[j] == "" {
					firstReason[j] = fn.Name + ": " + reason
				}
			}
			continue
		}
		sel.Selected = append(sel.Selected, fn)
		for _, j := range hits {
			selected[j]++
		}
	}

	var traceable []kernel.Symbol // read for the first name that matches nothing
	for j, p := range includes {
		if selected[j] == 0 {
			e := &NoMatchError{Pattern: p.Text, Matched: matched[j], Example: firstReason[j]}
			if matched[j] == 0 {
				if traceable == nil {
					traceable = c.AllTraceable()
				}
				e.Suggestions = p.suggest(traceable)
			}
			errs = append(errs, e)
		}
	}
	if len(includes) == 0 && len(sel.Selected) == 0 {
		errs = append(errs, fmt.Errorf("%w: the exclusions leave nothing", ErrNoMatch))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sel, nil
}

// allOf yields a pointer to each function of lists in turn.
func allOf(lists [][]kernel.Function) iter.Seq[*kernel.Function] {
	return func(yield func(*kernel.Function) bool) {
		for _, list := range lists {
			for i := range list {
				if !yield(&list[i]) {
					return
				}
			}
		}
	}
}

// exclusionReason says why a matched function is not selected, or "".
func exclusionReason(fn *kernel.Function, excludes []*Pattern) string {
	for _, p := range excludes {
		if p.Match(fn) {
			return "excluded by " + p.Text
		}
	}
	if !fn.Traceable {
		return fn.Reason
	}
	if fn.IsTracepoint() {
		return "" // the deny list names functions
	}
	return Denied(fn)
}

// Has says whether a function of this name is selected.
func (s *Selection) Has(name string) bool {
	for _, fn := range s.Selected {
		if fn.Name == name {
			return true
		}
	}
	return false
}
