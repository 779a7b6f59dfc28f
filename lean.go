// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// leanest returns the lean build of the capture program (TRAWL_LEAN in
// internal/bpf/capture.c: the features a trace may leave out compiled
// away), configured as full was, when the trace uses none of those
// features: when every constant of full that the lean build lacks is 0.
// Else it returns full. What the lean build saves each call is in
// docs/benchmarks.md, "The lean build".
func leanest(full *ebpf.CollectionSpec) (*ebpf.CollectionSpec, error) {
	lean, err := bpf.CaptureLeanSpec()
	if err != nil {
		return nil, err
	}
	var used []string
	for name, v := range full.Variables {
		if _, ok := lean.Variables[name]; !ok && slices.ContainsFunc(v.Value, func(b byte) bool { return b != 0 }) {
			used = append(used, name)
		}
	}
	if len(used) > 0 {
		slices.Sort(used)
		slog.Debug("capture program", "build", "full", "features", used)
		return full, nil
	}
	for name, v := range lean.Variables {
		fv, ok := full.Variables[name]
		if !ok || len(fv.Value) != len(v.Value) {
			return nil, fmt.Errorf("the lean capture program's variable %s does not match the full program's", name)
		}
		v.Value = bytes.Clone(fv.Value)
	}
	for name, m := range lean.Maps {
		if strings.HasPrefix(name, ".") {
			continue // data sections: built from the variables when loaded
		}
		fm, ok := full.Maps[name]
		if !ok {
			return nil, fmt.Errorf("the lean capture program's map %s is not in the full program", name)
		}
		m.Type, m.Flags, m.MaxEntries, m.Contents = fm.Type, fm.Flags, fm.MaxEntries, fm.Contents
	}
	slog.Debug("capture program", "build", "lean")
	return lean, nil
}
