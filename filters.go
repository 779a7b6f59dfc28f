// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/record"
	"github.com/trawl-dev/trawl/internal/skip"
)

// filters are the in-kernel filters of a session besides pid and comm:
// cgroup, duration, errors and the --filter expression.
type filters struct {
	cgroup      uint64
	cgroupLevel uint32
	cgroupExact bool
	minDuration time.Duration
	errors      bool
	expr        *filter.Expr
	consts      filter.Constants
	// skips counts functions left out by reason; firstErr is the first
	// expression error, shown when no function is left.
	skips    skip.Reasons
	firstErr error
}

// newFilters checks the filters of cfg: the expression parses, the cgroup
// exists.
func newFilters(cfg Config, cat *kernel.Catalogue) (*filters, error) {
	f := &filters{minDuration: cfg.MinDuration, errors: cfg.Errors, skips: skip.Reasons{}}
	if cfg.Cgroup != "" {
		id, err := cgroupID(cfg.Cgroup)
		if err != nil {
			return nil, err
		}
		f.cgroup, f.cgroupLevel, f.cgroupExact = id, cgroupLevel(cfg.Cgroup), cfg.CgroupExact
	}
	if cfg.Filter != "" {
		var err error
		if f.expr, err = filter.Parse(cfg.Filter); err != nil {
			return nil, err
		}
		if f.consts, err = filter.KernelConstants(cat.Spec("")); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// cgroupID returns the id of a cgroup v2 directory: its inode number,
// which is what bpf_get_current_cgroup_id returns.
func cgroupID(path string) (uint64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", path, err)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return 0, fmt.Errorf("cgroup %s: not in a cgroup v2 file system (mounted at /sys/fs/cgroup on most systems)", path)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("cgroup %s: not a directory", path)
	}
	return st.Ino, nil
}

// cgroupLevel returns the level of a cgroup v2 directory: how many of
// its ancestors are in the cgroup2 file system, 0 for its root. Inside a
// cgroup namespace, this counts from the namespace's root, not the
// kernel's.
func cgroupLevel(path string) uint32 {
	var level uint32
	dir, _ := filepath.Abs(path)
	for dir != "/" {
		dir = filepath.Dir(dir)
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
			break
		}
		level++
	}
	return level
}

// compile returns the compiled expression for p, or why p is left out
// ("" when it is not).
func (f *filters) compile(p *plan.Plan) (asm.Instructions, string) {
	if f.errors && !record.CanFail(p) {
		return nil, "--errors: the return value cannot tell an error (void, unsigned, bool or struct)"
	}
	if f.expr == nil {
		return nil, ""
	}
	body, err := filter.Compile(f.expr, p, f.consts)
	if err != nil {
		if f.firstErr == nil {
			f.firstErr = err
		}
		var fe *filter.Error
		if errors.As(err, &fe) {
			return nil, "--filter: " + fe.Msg
		}
		return nil, "--filter: " + err.Error()
	}
	return body, ""
}

// leaveOut notes a function left out.
func (f *filters) leaveOut(reason, fn string) {
	f.skips.Add(reason, fn)
}

// noneLeft is the error when the filters left out every function.
func (f *filters) noneLeft(n int) error {
	if f.firstErr != nil {
		return fmt.Errorf("--filter fits none of the %d functions (e.g. %w)", n, f.firstErr)
	}
	return fmt.Errorf("the filters leave none of the %d functions: %s", n, strings.Join(f.skips.Summary(1), "; "))
}

// configure sets the filters' constants in the capture program, and puts
// the compiled expressions into the programs that serve every target.
// fentry and fexit programs get theirs per function, when attaching.
func (f *filters) configure(spec *ebpf.CollectionSpec, targets []backend.Target) error {
	var at bpf.CaptureFilterPlace // 0: no expression
	if f.expr != nil {
		at = bpf.CaptureFilterPlaceFILTER_AT_ENTRY
		if f.expr.UsesRet() {
			at = bpf.CaptureFilterPlaceFILTER_AT_EXIT
		}
	}
	errs := uint32(0)
	if f.errors {
		errs = 1
	}
	set := map[string]any{
		bpf.CaptureVarFilterCgroup:      f.cgroup,
		bpf.CaptureVarFilterCgroupLevel: f.cgroupLevel,
		bpf.CaptureVarFilterCgroupExact: b2u32(f.cgroupExact),
		bpf.CaptureVarMinDuration:       uint64(f.minDuration.Nanoseconds()),
		bpf.CaptureVarFilterErrors:      errs,
		bpf.CaptureVarFilterAt:          at,
	}
	for name, v := range set {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	for name, ps := range spec.Programs {
		if name == bpf.CaptureProgFentryCapture || name == bpf.CaptureProgFexitCapture {
			continue
		}
		if err := backend.SpliceFilter(ps, targets); err != nil {
			return err
		}
	}
	return nil
}

func b2u32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// notify tells the user which functions the filters left out.
func (f *filters) notify(notify func(string)) {
	for _, line := range f.skips.Summary(1) {
		notify("left out " + line)
	}
}
