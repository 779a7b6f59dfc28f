// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/filter"
)

// SpliceFilter puts the compiled --filter expressions of targets into
// prog, replacing the body of its trawl_filter stub with a dispatch on the
// function. Programs that serve one function (fentry, fexit) get a copy
// with just that target. Without filters, or in a program that does not
// call the stub, it does nothing. It puts the --show expressions into the
// trawl_show stub the same way.
func SpliceFilter(prog *ebpf.ProgramSpec, targets []Target) error {
	if err := spliceShow(prog, targets); err != nil {
		return err
	}
	var funcs []filter.Func
	for _, t := range targets {
		if t.Filter != nil {
			funcs = append(funcs, filter.Func{ID: t.ID, Body: t.Filter})
		}
	}
	if len(funcs) == 0 {
		return nil
	}
	body, err := filter.Program(funcs)
	if err != nil {
		return fmt.Errorf("build the filter of %s: %w", prog.Name, err)
	}
	prog.Instructions, err = splice(prog.Instructions, filter.Stub, body)
	return err
}

// spliceShow puts the compiled --show expressions of targets into prog's
// trawl_show stub, as SpliceFilter does for filters.
func spliceShow(prog *ebpf.ProgramSpec, targets []Target) error {
	var funcs []filter.Func
	for _, t := range targets {
		if t.Show != nil {
			funcs = append(funcs, filter.Func{ID: t.ID, Body: t.Show})
		}
	}
	if len(funcs) == 0 {
		return nil
	}
	body, err := filter.Program(funcs)
	if err != nil {
		return fmt.Errorf("build the --show code of %s: %w", prog.Name, err)
	}
	prog.Instructions, err = splice(prog.Instructions, filter.ShowStub, body)
	return err
}
