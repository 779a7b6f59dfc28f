// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
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
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/skip"
	"github.com/trawl-dev/trawl/render"
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
	// DetachProgress, if set, is told how detaching goes in Close: links
	// closed out of how many (thousands of trampolines take minutes to
	// detach under emulation).
	DetachProgress func(done, total int)
	// Notify, if set, receives one-line notices for the user (a degraded
	// source of kernel facts); else they go to log/slog.
	Notify func(string)
	// RingBufferSize is the size in bytes of the ring buffer the calls go
	// through, a power of two number of pages (see CheckRingBufferSize);
	// 0 means DefaultRingBufferSize. A bigger one drops fewer calls in
	// bursts, at the cost of locked kernel memory.
	RingBufferSize int
}

// errTooManySlots leaves out functions whose arguments take more slots
// than the capture program reads.
var errTooManySlots = fmt.Errorf("more than the %d argument slots trawl reads", backend.MaxSlots)

// Call is one traced call, decoded.
type Call = render.Call

// ErrClosed is returned by Read once the session is closed.
var ErrClosed = errors.New("trawl session closed")

// OpenError is returned by Open when it failed (or was cancelled) after
// it began to attach: Stats says what had been attached and skipped, and
// what the program counted, before Open detached it all again.
type OpenError struct {
	Stats Stats
	Err   error
}

func (e *OpenError) Error() string { return e.Err.Error() }
func (e *OpenError) Unwrap() error { return e.Err }

// Session is a running trace.
type Session struct {
	Selection *selector.Selection
	Backend   string
	plans     []*plan.Plan
	coll      *ebpf.Collection
	attached  *backend.Attachment
	fork      link.Link
	reader    *ringbuf.Reader
	exit      link.Link
	decoder   *event.Decoder
	planSkips skip.Reasons
	detached  func(done, total int)
	closeOnce sync.Once
	stopOnce  sync.Once
	rec       ringbuf.Record
	// received and discarded count the records read from the ring
	// buffer: decoded by Read, or dropped unread by Discard.
	received, discarded uint64
	// final holds the counters read in Close, after detaching.
	final *Stats
}

// Open selects the functions, loads the capture program and attaches it.
func Open(ctx context.Context, cfg Config) (_ *Session, err error) {
	if err := livePrivilegeFacts().checkCapabilities(); err != nil {
		return nil, err
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
	s := &Session{Selection: sel, Backend: name, planSkips: skip.Reasons{}, detached: cfg.DetachProgress}
	defer func() {
		if err == nil {
			return
		}
		if s.attached == nil {
			s.Close()
			return
		}
		// Attaching began: say how far it got.
		st, _ := s.Stats()
		s.Close()
		err = &OpenError{Stats: st, Err: err}
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
			s.planSkips.Add(skip.Reason(err), fn.Name)
			continue
		}
		body, reason := flt.compile(p)
		if reason != "" {
			s.planSkips.Add(reason, fn.Name)
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
		return nil, fmt.Errorf("none of the %d selected functions can be attached with %s: %s", len(sel.Selected), name, strings.Join(s.planSkips.Summary(1), "; "))
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, explainPermission(err)
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
	if err != nil {
		return nil, explainPermission(err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.attached.Attached == 0 {
		return nil, fmt.Errorf("no function could be attached: %s", strings.Join(s.attached.Skipped.Summary(1), "; "))
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
	size := cmp.Or(cfg.RingBufferSize, DefaultRingBufferSize)
	if err := CheckRingBufferSize(size); err != nil {
		return err
	}
	spec.Maps[bpf.CaptureMapEvents].MaxEntries = uint32(size)
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
	keep := map[string]bool{bpf.CaptureProgFollowFork: true, bpf.CaptureProgForgetExit: true}
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
	if err != nil {
		return explainPermission(fmt.Errorf("load the capture program: %w", err))
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
	s.exit, err = link.AttachTracing(link.TracingOptions{Program: s.coll.Programs[bpf.CaptureProgForgetExit]})
	if err != nil {
		return fmt.Errorf("follow exits: %w", err)
	}
	return nil
}

// Read blocks until the next call and decodes it into c. It returns
// ErrClosed once the session is closed, and os.ErrDeadlineExceeded when
// the deadline set by SetDeadline passes first.
func (s *Session) Read(c *Call) error {
	if err := s.reader.ReadInto(&s.rec); err != nil {
		if errors.Is(err, ringbuf.ErrClosed) {
			return ErrClosed
		}
		return err
	}
	s.received++
	r, err := event.Parse(s.rec.RawSample)
	if err != nil {
		return err
	}
	return s.decoder.Call(&r, c)
}

// Stop stops tracing new calls at once, at any call rate: the program
// ignores entries from now on, while calls in flight still end and are
// sent. The calls already sent stay readable with Read until Close.
func (s *Session) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		if err = s.coll.Variables[bpf.CaptureVarArmed].Set(uint32(0)); err != nil {
			err = fmt.Errorf("disarm the capture program: %w", err)
		}
	})
	return err
}

// Discard drops the calls waiting in the ring buffer without decoding
// them and returns how many it dropped; Stats counts them as Discarded.
// After Stop it empties the buffer quickly when there is no time left to
// show them.
func (s *Session) Discard() (int, error) {
	n := 0
	s.reader.SetDeadline(time.Now())
	defer s.reader.SetDeadline(time.Time{})
	for {
		err := s.reader.ReadInto(&s.rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrClosed):
			return n, nil
		case err != nil:
			return n, err
		}
		n++
		s.received++
		s.discarded++
	}
}

// SetDeadline makes Read return os.ErrDeadlineExceeded once t has passed
// and no call is waiting; the zero time waits forever.
func (s *Session) SetDeadline(t time.Time) { s.reader.SetDeadline(t) }

// Stats are the session's counters. Every call the program saw end is
// accounted for:
//
//	Calls = Received + Drops + FilteredExit + calls not yet read
//
// and Received = calls read by Read + Discarded.
type Stats struct {
	// Calls counts the traced calls whose exit the program saw, sent or
	// not; Drops those the ring buffer had no room for.
	Calls, Drops uint64
	// Received counts the calls read from the ring buffer, Discarded
	// those of them dropped unread by Discard.
	Received, Discarded uint64
	// MissStorage counts entries without task storage, MissDepth calls
	// nested deeper than the shadow stack, MissEntry exits without their
	// entry (sent flagged exit-only), MissExit entries whose exit never
	// came, MissFrame calls sent without their captured memory (their
	// frame was evicted from the frames map), MissPIDs children of traced
	// processes not followed because the pids map was full.
	MissStorage, MissDepth, MissEntry, MissExit, MissFrame, MissPIDs uint64
	// Filtered counts entries dropped in the kernel by the task filters
	// (pid, comm, cgroup), FilteredExpr entries dropped by an
	// arguments-only --filter expression, FilteredExit calls dropped at
	// exit by --min-duration, --errors or a --filter using ret.
	Filtered, FilteredExpr, FilteredExit uint64
	// CookieLookups counts kprobe program runs that found their function
	// by the attach cookie, the address table lacking its address: slower,
	// and expected to stay 0.
	CookieLookups   uint64
	RecursionMisses map[string]uint64
	// Attached counts the functions attached; Skipped lists those left
	// out (for the kprobe backends, addresses), by reason.
	Attached int
	Skipped  Skips
}

// Skips lists what a session left out, by reason: functions, or for the
// kprobe backends addresses.
type Skips map[string][]string

// Count returns the number of functions (or addresses) left out.
func (s Skips) Count() int { return skip.Reasons(s).Count() }

// Summary returns one line per reason, those with most items first, then
// by reason: the count, the reason and up to examples of its items, as in
// "3 busy: another ftrace user owns the function (EBUSY) (e.g. a, b)".
func (s Skips) Summary(examples int) []string { return skip.Reasons(s).Summary(examples) }

// Stats reads the counters. After Close it returns those read once
// everything was detached.
func (s *Session) Stats() (Stats, error) {
	if s.final != nil {
		return *s.final, nil
	}
	skipped := skip.Reasons{}
	skipped.Merge(s.planSkips)
	st := Stats{Skipped: Skips(skipped), Received: s.received, Discarded: s.discarded}
	if s.attached != nil {
		st.Attached = s.attached.Attached
		st.RecursionMisses = s.attached.RecursionMisses()
		skipped.Merge(s.attached.Skipped)
	}
	if s.coll == nil {
		return st, nil
	}
	if err := addCounters(&st, s.coll.Maps[bpf.CaptureMapCounters]); err != nil {
		return st, fmt.Errorf("read counters: %w", err)
	}
	return st, nil
}

// Close detaches everything and frees the programs and maps. Calls that
// ended after the last Read are counted as Discarded; Stats returns the
// final counters after Close.
func (s *Session) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.attached != nil {
			errs = append(errs, s.attached.Close(s.detached))
		}
		for _, l := range []link.Link{s.fork, s.exit} {
			if l != nil {
				errs = append(errs, l.Close())
			}
		}
		if s.reader != nil {
			// Nothing runs any more: what is left was never read.
			_, err := s.Discard()
			st, statsErr := s.Stats()
			s.final = &st
			errs = append(errs, err, statsErr, s.reader.Close())
		}
		if s.coll != nil {
			s.coll.Close()
		}
	})
	return errors.Join(errs...)
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
