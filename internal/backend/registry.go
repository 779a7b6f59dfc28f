// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// Name is the name users choose a backend by; each backend's file
// declares its own.
type Name string

// Backend is one way to attach the capture program. Each backend's file
// declares its entry with register, so adding a backend touches one file.
type Backend struct {
	// Name is the name users choose the backend by.
	Name Name
	// Needs probes the kernel feature the backend needs (see
	// internal/kernel/features): nil when the running kernel has it.
	Needs func() error
	// Family says how the backend's programs read arguments, and so which
	// functions it can attach (see plan.Attachable).
	Family plan.Family
	// Keeps names the capture programs loaded with the maps, before
	// Attach; Attach loads its own copies of the others, or none.
	Keeps []string
	// Prepare, if set, readies the collection spec before it is loaded,
	// for targets among the selected functions fns: the spec is loaded
	// while they are planned.
	Prepare func(spec *ebpf.CollectionSpec, fns []*kernel.Function) error
	// Fill, if set, stores in the loaded collection what its programs
	// find the targets by, before they are attached.
	Fill func(coll *ebpf.Collection, targets []Target) error
	// Attach attaches the capture program to the targets, telling
	// progress, if not nil, how it goes. On error the attachment, if not
	// nil, holds what was attached, for the caller to report and close.
	Attach func(ctx context.Context, c Capture, targets []Target, progress Progress) (*Attachment, error)

	// cost is what each function holds with a backend that loads
	// programs per function, nil for those attaching one link for all.
	cost *perFunction
	// withEntry, if set, is the backend whose programs run in this one's
	// place with --entry (see Choose).
	withEntry *Backend
}

// Fits fails with ErrNotEnoughMemory when n functions attached with b
// would take more than half of the machine's available memory (see
// checkMemory). Checked before anything is planned or loaded, so that a
// selection too large is refused at once.
func (b *Backend) Fits(n int) error {
	if b.cost == nil {
		return nil
	}
	mem, err := kernel.MemInfo()
	if err != nil {
		return fmt.Errorf("read the available memory: %w", err)
	}
	return checkMemory(n, *b.cost, mem["MemAvailable"])
}

// Capture is the capture program as a backend attaches it: its spec, from
// which backends loading programs per function copy theirs, and the
// collection holding the maps and the programs the backend keeps.
type Capture struct {
	Spec       *ebpf.CollectionSpec
	Collection *ebpf.Collection
}

// all holds the backends, in the order their files register them.
var all []*Backend

func register(b *Backend) *Backend {
	all = append(all, b)
	return b
}

// All returns the backends, by name.
func All() []*Backend {
	return slices.SortedFunc(slices.Values(all), func(a, b *Backend) int { return cmp.Compare(a.Name, b.Name) })
}

// Find returns the backend of that name, or nil.
func Find(name Name) *Backend {
	for _, b := range all {
		if b.Name == name {
			return b
		}
	}
	return nil
}
