// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/skip"
)

// planEntry marks the plan of an --entry function, whose calls open the
// program's gate (see internal/bpf/gate.h).
const planEntry = uint16(bpf.CapturePlanFlagPLAN_ENTRY)

// selectWithEntries selects the functions of patterns and those of
// entries (--entry), which are traced too, and returns the selection
// with the set of entry functions. Exclusions among patterns apply to the
// entry functions as well. Without entries, patterns select alone.
func selectWithEntries(cat *kernel.Catalogue, patterns, entries []string) (*selector.Selection, map[*kernel.Function]bool, error) {
	if len(entries) == 0 {
		sel, err := selector.Select(cat, patterns)
		return sel, nil, err
	}
	entrySel, err := selector.Select(cat, entries)
	if err != nil {
		return nil, nil, fmt.Errorf("--entry: %w", err)
	}
	sel, err := selector.Select(cat, append(slices.Clone(patterns), entries...))
	if err != nil {
		return nil, nil, err
	}
	selected := make(map[*kernel.Function]bool, len(sel.Selected))
	for _, fn := range sel.Selected {
		selected[fn] = true
	}
	set := map[*kernel.Function]bool{}
	for _, fn := range entrySel.Selected {
		if selected[fn] {
			set[fn] = true
		}
	}
	if len(set) == 0 {
		return nil, nil, fmt.Errorf("--entry: the exclusions leave out all %d entry functions", len(entrySel.Selected))
	}
	return sel, set, nil
}

// checkEntries fails when --entry was given but none of its functions
// could be planned: the gate would never open.
func (s *Session) checkEntries() error {
	if len(s.entries) == 0 {
		return nil
	}
	for _, t := range s.targets {
		if s.entries[t.Plan.Func] {
			return nil
		}
	}
	names := map[string]bool{}
	for fn := range s.entries {
		names[fn.Name] = true
	}
	why := skip.Reasons{}
	for reason, fns := range s.planSkips {
		for _, fn := range fns {
			if names[fn] {
				why.Add(reason, fn)
			}
		}
	}
	return fmt.Errorf("--entry: none of the %d entry functions can be traced: %s", len(s.entries), strings.Join(why.Summary(1), "; "))
}

// chainBuffer is the number of calls the chains map keeps, over all
// tasks: MAX_DEPTH calls each for 64 tasks in entry calls at once.
const chainBuffer = 64 * int(bpf.CaptureLimitMAX_DEPTH)

// maxErrno is the largest error number a kernel function returns.
const maxErrno = 4095

// configureChains sets up error chains (Entries with Errors) and the
// --errno filter in the capture program.
func configureChains(spec *ebpf.CollectionSpec, cfg Config) error {
	// --stats counts every call under the entries: no chains then.
	chains := len(cfg.Entries) > 0 && cfg.Errors && !cfg.Aggregate
	set := map[string]any{bpf.CaptureVarErrorChains: boolWord(chains)}
	if chains {
		spec.Maps[bpf.CaptureMapChains].MaxEntries = uint32(chainBuffer)
	}
	if len(cfg.Errnos) > 0 || len(cfg.ExceptErrnos) > 0 {
		kept, err := errnoBits(cfg.Errnos, cfg.ExceptErrnos)
		if err != nil {
			return err
		}
		set[bpf.CaptureVarFilterErrno] = uint32(1)
		set[bpf.CaptureVarErrnoKept] = kept
	}
	for name, v := range set {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// errnoBits returns the program's errno_kept bitmap: bit e keeps error
// number e, bit 0 a NULL pointer (which no errno list names, so only an
// exception list keeps it).
func errnoBits(keep, except []syscall.Errno) ([(maxErrno + 1) / 64]uint64, error) {
	var bits [(maxErrno + 1) / 64]uint64
	if len(keep) > 0 && len(except) > 0 {
		return bits, errors.New("errnos to keep and errnos to drop cannot go together")
	}
	list := keep
	if len(except) > 0 {
		list = except
		for i := range bits {
			bits[i] = ^uint64(0)
		}
	}
	for _, e := range list {
		if e <= 0 || e > maxErrno {
			return bits, fmt.Errorf("error number %d out of range (1 to %d)", int(e), maxErrno)
		}
		if len(except) > 0 {
			bits[e/64] &^= 1 << (e % 64)
		} else {
			bits[e/64] |= 1 << (e % 64)
		}
	}
	return bits, nil
}

// boolWord is the program's word for b.
func boolWord(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
