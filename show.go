// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/skip"
)

// maxShow is the most --show expressions a session takes.
const maxShow = 8

// shows are the --show expressions of a session.
type shows struct {
	exprs  []filter.ShowExpr
	consts filter.Constants
	// blocks holds the layout of each plan's values, by plan index.
	blocks []filter.Block
	// missing counts, by expression and reason, the functions that lack
	// a name it uses.
	missing skip.Reasons
	on      bool
}

// newShows parses the --show expressions.
func newShows(srcs []string, cat *kernel.Catalogue) (*shows, error) {
	sh := &shows{missing: skip.Reasons{}}
	if len(srcs) == 0 {
		return sh, nil
	}
	for _, src := range srcs {
		e, err := filter.ParseShow(src)
		if err != nil {
			return nil, fmt.Errorf("--show: %w", err)
		}
		sh.exprs = append(sh.exprs, e)
	}
	var err error
	if sh.consts, err = filter.KernelConstants(cat.Spec("")); err != nil {
		return nil, err
	}
	return sh, nil
}

// target compiles the expressions for the target of plan index t.ID and
// sets its Show body.
func (sh *shows) target(t *backend.Target) error {
	var block filter.Block
	if len(sh.exprs) > 0 {
		body, b, missing, err := filter.CompileShow(sh.exprs, t.Plan, sh.consts)
		if err != nil {
			return err
		}
		for _, m := range missing {
			var fe *filter.Error
			if errors.As(m, &fe) {
				sh.missing.Add(fmt.Sprintf("--show %s: %s", fe.Src, fe.Msg), t.Plan.Func.Name)
			}
		}
		t.Show, block = body, b
		sh.on = sh.on || body != nil
	}
	sh.blocks = append(sh.blocks, block)
	return nil
}

// notify tells which functions are traced without some expression.
func (sh *shows) notify(notify func(string)) {
	for _, line := range sh.missing.Summary(1) {
		notify("shown without " + line)
	}
}

// configure tells the capture program whether to run trawl_show.
func (sh *shows) configure(spec *ebpf.CollectionSpec) error {
	on := uint32(0)
	if sh.on {
		on = 1
	}
	if err := spec.Variables[bpf.CaptureVarShowOn].Set(on); err != nil {
		return fmt.Errorf("set %s: %w", bpf.CaptureVarShowOn, err)
	}
	return nil
}
