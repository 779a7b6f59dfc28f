package trawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/event"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/render"
	"github.com/trawl-dev/trawl/internal/selector"
)

// Backend names.
const (
	BackendAuto          = "auto"
	BackendFentry        = "fentry"
	BackendKprobeMulti   = "kprobe-multi"
	BackendKprobeSession = "kprobe-session"
	BackendFsession      = "fsession"
	BackendTracingMulti  = "tracing-multi"
)

// Backends lists the backend names Config.Backend takes, auto first.
var Backends = []string{BackendAuto, BackendFentry, BackendKprobeMulti, BackendKprobeSession, BackendFsession, BackendTracingMulti}

// Config says what to trace and how.
type Config struct {
	// Patterns select the functions (see internal/selector).
	Patterns []string
	// Backend is BackendAuto (see ChooseBackend), BackendFentry (5.17+,
	// cookies 6.0+), BackendKprobeMulti (5.18+; arm64 6.14+ in practice),
	// BackendKprobeSession (6.10+), BackendFsession (7.0+) or
	// BackendTracingMulti (7.2+, x86-64). fsession and tracing-multi
	// attach vmlinux functions only.
	Backend string
	// PIDs, if set, limits tracing to these processes and their children.
	PIDs []int
	// Comm, if set, limits tracing to tasks of this name.
	Comm string
	// Cgroup, if set, limits tracing to tasks in this cgroup v2 directory
	// (not its descendants).
	Cgroup string
	// MinDuration, if set, keeps only calls that take at least this long.
	MinDuration time.Duration
	// Errors keeps only calls that return an error: a negative errno from
	// a signed integer, NULL or ERR_PTR from a pointer. Functions whose
	// return value cannot tell an error are left out.
	Errors bool
	// Filter is an expression over arguments and ret that a call must
	// satisfy (see internal/filter for the language). Functions lacking a
	// name it uses are left out, with a notice.
	Filter string
	// Plan sets byte budgets of captured memory.
	Plan plan.Options
	// Decode sets how values are shown.
	Decode decode.Options
	// Progress, if set, is told how attaching goes.
	Progress backend.Progress
	// Notify, if set, receives one-line notices for the user (a degraded
	// source of kernel facts); else they go to log/slog.
	Notify func(string)
}

// errTooManySlots leaves out functions whose arguments take more slots
// than the capture program reads.
var errTooManySlots = fmt.Errorf("more than the %d argument slots trawl reads", backend.MaxSlots)

// Call is one traced call, decoded.
type Call = render.Call

// ErrNoPrivileges is returned when trawl may not load BPF programs.
var ErrNoPrivileges = errors.New("trawl needs root (or CAP_BPF and CAP_PERFMON) and a kernel that allows BPF tracing programs")

// Session is a running trace.
type Session struct {
	Selection *selector.Selection
	Backend   string
	plans     []*plan.Plan
	coll      *ebpf.Collection
	attached  *backend.Attachment
	fork      link.Link
	reader    *ringbuf.Reader
	decoder   *event.Decoder
	planSkips map[string][]string
	closeOnce sync.Once
	rec       ringbuf.Record
}

// Open selects the functions, loads the capture program and attaches it.
func Open(ctx context.Context, cfg Config) (_ *Session, err error) {
	if os.Geteuid() != 0 && !hasBPFCaps() {
		return nil, ErrNoPrivileges
	}
	cat, err := kernel.Live()
	if err != nil {
		return nil, err
	}
	notify := cfg.Notify
	if notify == nil {
		notify = func(n string) { slog.Warn(n) }
	}
	if n := cat.Notice(); n != "" {
		notify(n)
	}
	flt, err := newFilters(cfg, cat)
	if err != nil {
		return nil, err
	}
	sel, err := selector.Select(cat, cfg.Patterns)
	if err != nil {
		return nil, err
	}
	arch, err := plan.HostArch()
	if err != nil {
		return nil, err
	}
	version, err := kernelVersion()
	if err != nil {
		return nil, err
	}
	name, _, err := chooseBackend(cfg.Backend, sel)
	if err != nil {
		return nil, err
	}
	s := &Session{Selection: sel, Backend: name, planSkips: map[string][]string{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	kind := plan.Fentry
	if name == BackendKprobeMulti || name == BackendKprobeSession {
		kind = plan.Kprobe
	}
	var targets []backend.Target
	for _, fn := range sel.Selected {
		p, err := plan.New(fn, cfg.Plan)
		if err == nil {
			err = p.Attachable(kind, arch, version)
		}
		if err == nil && p.NumSlots > backend.MaxSlots {
			err = fmt.Errorf("%w: %d", errTooManySlots, p.NumSlots)
		}
		if err != nil {
			reason := err.Error()
			if i := strings.Index(reason, ": "); i >= 0 && errors.Unwrap(err) != nil {
				reason = reason[:i]
			}
			s.planSkips[reason] = append(s.planSkips[reason], fn.Name)
			continue
		}
		body, reason := flt.compile(p)
		if reason != "" {
			s.planSkips[reason] = append(s.planSkips[reason], fn.Name)
			flt.leaveOut(reason, fn.Name)
			continue
		}
		targets = append(targets, backend.Target{ID: uint32(len(s.plans)), Plan: p, Filter: body})
		s.plans = append(s.plans, p)
	}
	flt.notify(notify)
	if len(targets) == 0 && len(flt.skips) > 0 {
		return nil, flt.noneLeft(len(sel.Selected))
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("none of the %d selected functions can be attached with %s: %s", len(sel.Selected), name, strings.Join(summarise(s.planSkips), "; "))
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, err
	}
	spec, err := bpf.LoadCapture()
	if err != nil {
		return nil, err
	}
	if err := backend.Relocate(spec, cat.Spec("")); err != nil {
		return nil, err
	}
	if err := configure(spec, cfg, len(targets)); err != nil {
		return nil, err
	}
	if kind == plan.Kprobe {
		if err := backend.NewAddressTable(targets).Configure(spec); err != nil {
			return nil, err
		}
	}
	if err := flt.configure(spec, targets); err != nil {
		return nil, err
	}
	if err := s.load(spec, name); err != nil {
		return nil, err
	}
	plansMap := s.coll.Maps[bpf.CaptureMapPlans]
	for _, t := range targets {
		w, err := backend.Wire(t.Plan, arch)
		if err != nil {
			return nil, err
		}
		if err := plansMap.Put(t.ID, &w); err != nil {
			return nil, fmt.Errorf("store the plan of %s: %w", t.Plan.Func.Name, err)
		}
	}
	if len(cfg.PIDs) > 0 {
		if err := s.followPIDs(cfg.PIDs); err != nil {
			return nil, err
		}
	}
	if s.reader, err = ringbuf.NewReader(s.coll.Maps[bpf.CaptureMapEvents]); err != nil {
		return nil, err
	}
	switch name {
	case BackendFentry:
		s.attached, err = backend.AttachFentry(ctx, spec, s.coll.Maps, targets, cfg.Progress)
	case BackendFsession:
		s.attached, err = backend.AttachFsession(ctx, spec, s.coll.Maps, targets, cfg.Progress)
	case BackendTracingMulti:
		s.attached, err = backend.TracingMulti(ctx, spec, s.coll.Maps, targets, cfg.Progress)
	case BackendKprobeSession:
		s.attached, err = backend.KprobeSession(ctx, s.coll.Programs[bpf.CaptureProgKprobeSessionCapture], targets, cfg.Progress)
	default:
		s.attached, err = backend.KprobeMulti(ctx, s.coll.Programs[bpf.CaptureProgKprobeCapture], s.coll.Programs[bpf.CaptureProgKretprobeCapture], targets, cfg.Progress)
	}
	if errors.Is(err, unix.EPERM) {
		return nil, fmt.Errorf("%w: the kernel refused (%w)", ErrNoPrivileges, err)
	}
	if err != nil {
		return nil, err
	}
	if s.attached.Attached == 0 {
		return nil, fmt.Errorf("no function could be attached: %s", strings.Join(s.attached.SkipSummary(), "; "))
	}
	if err := s.coll.Variables[bpf.CaptureVarArmed].Set(uint32(1)); err != nil {
		return nil, fmt.Errorf("arm the capture program: %w", err)
	}
	sym, err := kernel.LiveSymbolizer()
	if err != nil {
		return nil, fmt.Errorf("read kernel symbols: %w", err)
	}
	s.decoder = event.NewDecoder(s.plans, cfg.Decode, sym)
	return s, nil
}

// configure sets the program's constants and map sizes.
func configure(spec *ebpf.CollectionSpec, cfg Config, n int) error {
	spec.Maps[bpf.CaptureMapPlans].MaxEntries = uint32(n)
	var comm [16]byte
	if len(cfg.Comm) >= len(comm) {
		return fmt.Errorf("comm %q is longer than the kernel's 15 characters", cfg.Comm)
	}
	copy(comm[:], cfg.Comm)
	set := map[string]any{
		bpf.CaptureVarFilterPids: uint32(min(len(cfg.PIDs), 1)),
		bpf.CaptureVarFilterComm: comm,
	}
	for name, v := range set {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// load creates the maps and loads the programs the backend runs from the
// collection; trampoline programs are loaded per function (fentry,
// fsession) or once for all (tracing-multi) later.
func (s *Session) load(spec *ebpf.CollectionSpec, name string) error {
	keep := map[string]bool{bpf.CaptureProgFollowFork: true}
	switch name {
	case BackendKprobeMulti:
		keep[bpf.CaptureProgKprobeCapture] = true
		keep[bpf.CaptureProgKretprobeCapture] = true
	case BackendKprobeSession:
		keep[bpf.CaptureProgKprobeSessionCapture] = true
	}
	trimmed := spec.Copy()
	for p := range trimmed.Programs {
		if !keep[p] {
			delete(trimmed.Programs, p)
		}
	}
	if keep[bpf.CaptureProgKprobeSessionCapture] {
		if err := backend.ResolveKfuncs(trimmed.Programs[bpf.CaptureProgKprobeSessionCapture].Instructions); err != nil {
			return fmt.Errorf("kprobe-session backend: %w", err)
		}
	}
	var err error
	s.coll, err = ebpf.NewCollection(trimmed)
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: the kernel refused (%w)", ErrNoPrivileges, err)
	}
	if err != nil {
		return fmt.Errorf("load the capture program: %w", err)
	}
	return nil
}

// followPIDs traces the processes and, through the fork program, their
// children.
func (s *Session) followPIDs(pids []int) error {
	m := s.coll.Maps[bpf.CaptureMapPids]
	for _, pid := range pids {
		if err := m.Put(uint32(pid), uint8(1)); err != nil {
			return err
		}
	}
	var err error
	s.fork, err = link.AttachTracing(link.TracingOptions{Program: s.coll.Programs[bpf.CaptureProgFollowFork]})
	if err != nil {
		return fmt.Errorf("follow forks: %w", err)
	}
	return nil
}

// Read blocks until the next call and decodes it into c. It returns
// ringbuf.ErrClosed once the session is closed.
func (s *Session) Read(c *Call) error {
	for {
		if err := s.reader.ReadInto(&s.rec); err != nil {
			return err
		}
		r, err := event.Parse(s.rec.RawSample)
		if err != nil {
			return err
		}
		return s.decoder.Call(&r, c)
	}
}

// SetDeadline makes Read return os.ErrDeadlineExceeded once t has passed
// and no call is waiting; the zero time waits forever.
func (s *Session) SetDeadline(t time.Time) { s.reader.SetDeadline(t) }

// Stats are the session's counters.
type Stats struct {
	Calls, Drops                                uint64
	MissStorage, MissDepth, MissEntry, MissExit uint64
	// Filtered counts calls dropped in the kernel by the task filters
	// (pid, comm, cgroup), FilteredExpr by the --filter expression,
	// FilteredExit by --min-duration and --errors.
	Filtered, FilteredExpr, FilteredExit uint64
	// CookieLookups counts kprobe program runs that found their function
	// by the attach cookie, the address table lacking its address: slower,
	// and expected to stay 0.
	CookieLookups   uint64
	RecursionMisses map[string]uint64
	Attached        int
	Skipped         map[string][]string
}

// Stats reads the counters.
func (s *Session) Stats() (Stats, error) {
	st := Stats{Skipped: map[string][]string{}}
	for r, fns := range s.planSkips {
		st.Skipped[r] = append(st.Skipped[r], fns...)
	}
	if s.attached != nil {
		st.Attached = s.attached.Attached
		st.RecursionMisses = s.attached.RecursionMisses()
		for r, fns := range s.attached.Skipped {
			st.Skipped[r] = append(st.Skipped[r], fns...)
		}
	}
	counters := []*uint64{&st.Calls, &st.Drops, &st.MissStorage, &st.MissDepth, &st.MissEntry, &st.MissExit, &st.Filtered, &st.FilteredExpr, &st.FilteredExit, &st.CookieLookups}
	for i, dst := range counters {
		var perCPU []uint64
		if err := s.coll.Maps[bpf.CaptureMapCounters].Lookup(uint32(i), &perCPU); err != nil {
			return st, fmt.Errorf("read counters: %w", err)
		}
		for _, v := range perCPU {
			*dst += v
		}
	}
	return st, nil
}

// Close detaches everything and frees the programs and maps.
func (s *Session) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.attached != nil {
			errs = append(errs, s.attached.Close())
		}
		if s.fork != nil {
			errs = append(errs, s.fork.Close())
		}
		if s.reader != nil {
			errs = append(errs, s.reader.Close())
		}
		if s.coll != nil {
			s.coll.Close()
		}
	})
	return errors.Join(errs...)
}

func summarise(skips map[string][]string) []string {
	var out []string
	for r, fns := range skips {
		out = append(out, fmt.Sprintf("%d %s (e.g. %s)", len(fns), r, fns[0]))
	}
	return out
}

// hasBPFCaps reports whether the process has CAP_BPF and CAP_PERFMON
// (5.8+), which let a non-root user load tracing programs.
func hasBPFCaps() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	has := func(c int) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	return has(unix.CAP_BPF) && has(unix.CAP_PERFMON)
}

// kernelVersion reads the running kernel's major and minor version.
func kernelVersion() (plan.KernelVersion, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return plan.KernelVersion{}, err
	}
	release := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return plan.KernelVersion{}, fmt.Errorf("cannot parse kernel release %q", release)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return plan.KernelVersion{}, fmt.Errorf("cannot parse kernel release %q", release)
	}
	return plan.KernelVersion{Major: major, Minor: minor}, nil
}
