// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
)

// shadowThreads is how many threads' shadow stacks the shadows map holds
// where the kernel has no task storage (before 5.11): an LRU hash map by
// thread id, about 2 KB a thread, allocated when it is created (16 MB).
const shadowThreads = 8192

// configureLegacy rewrites the capture program for a kernel without task
// storage or bpf_get_current_task_btf (5.11): shadow stacks in an LRU hash
// map by thread id, and the task's ids and name from older helpers (see
// shadow_by_tid and task_by_helpers in internal/bpf/task.h). A kernel
// without BTF of its own (kernel.UseBTF) takes both: the verifier knows
// the task bpf_get_current_task_btf returns, which task storage is found
// by, from the kernel's BTF.
func configureLegacy(spec *ebpf.CollectionSpec) error {
	set := map[string]any{}
	external := kernel.External() != nil
	missing, err := lacks(features.TaskStorage)
	if err != nil {
		return fmt.Errorf("probe for task storage: %w", err)
	}
	if missing || external {
		m := spec.Maps[bpf.CaptureMapShadows]
		m.Type, m.Flags, m.MaxEntries = ebpf.LRUHash, 0, shadowThreads
		set[bpf.CaptureVarShadowByTid] = uint32(1)
		slog.Debug("no task storage: shadow stacks in an LRU hash map by thread id", "threads", shadowThreads)
	}
	if missing, err = lacks(features.TaskBTF); err != nil {
		return fmt.Errorf("probe for bpf_get_current_task_btf: %w", err)
	}
	if missing || external {
		set[bpf.CaptureVarTaskByHelpers] = uint32(1)
		slog.Debug("no bpf_get_current_task_btf: task ids and names from older helpers")
	}
	for name, v := range set {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// configureGlobals makes the capture program's global functions static
// for a kernel without pointer arguments in global functions (5.12). It
// runs on the build that will load (see leanest).
func configureGlobals(spec *ebpf.CollectionSpec) error {
	missing, err := lacks(features.GlobalPtrArgs)
	if err != nil {
		return fmt.Errorf("probe for pointer arguments of global functions: %w", err)
	}
	if missing {
		for _, ps := range spec.Programs {
			ps.Instructions = backend.MakeStatic(ps.Instructions, backend.CaptureFunc, filter.Stub, filter.ShowStub)
		}
		slog.Debug("no pointer arguments in global functions: the capture, filter and show functions made static")
	}
	return nil
}

// lacks runs a feature probe: true when the kernel lacks the feature, an
// error when the probe failed for another reason.
func lacks(probe func() error) (bool, error) {
	err := probe()
	if errors.Is(err, ebpf.ErrNotSupported) {
		return true, nil
	}
	return false, err
}
