// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/event"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/skip"
)

// ErrClosed is returned by Read once the session is closed.
var ErrClosed = errors.New("trawl session closed")

// ErrBadPattern is returned by Open, List and ChooseBackend for a
// pattern that does not parse, or for no pattern at all.
var ErrBadPattern = errors.New("bad pattern")

// ErrNoMatch is returned by Open, List and ChooseBackend when an
// including pattern selects no traceable function.
var ErrNoMatch = errors.New("pattern selects no traceable function")

// ErrNotEnoughMemory is returned by Open when the functions selected
// would take more kernel memory than the machine can spare, with a
// backend that loads programs per function (fentry, fsession).
var ErrNotEnoughMemory = errors.New("not enough memory")

// ErrNotAggregating is returned by FunctionStats and StackCounts of a
// session that sends each call (Config.Aggregate not set).
var ErrNotAggregating = errors.New("the session sends each call: it counts no statistics in the kernel")

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
//
// Its methods may be called from several goroutines at once: Close, Stop,
// Stats, FunctionStats and StackCounts while another goroutine blocks in
// Read (Close makes that Read return ErrClosed at once), and Stats,
// FunctionStats and StackCounts while Close detaches (they return the
// final counters once Close has read them). Reads from several goroutines take turns, as do Read and
// Discard. SetDeadline waits for a Read in progress: set it from the
// goroutine that reads.
type Session struct {
	// Backend is the backend that attached the functions: the one whose
	// programs run.
	Backend Backend
	// sel is what the patterns selected, and backend what attaches it.
	sel     *selector.Selection
	backend *backend.Backend
	plans   []*plan.Plan
	targets []backend.Target
	flt     *filters
	// namespaced says trawl runs in a PID namespace other than the
	// initial one (pidns.go).
	namespaced bool
	show       *shows
	// stacks symbolises the calls' kernel stacks, with --stack.
	stacks *stackFrames
	// ustacks symbolises the calls' user stacks, with Config.UserStack.
	ustacks *userStacks
	// entries are the functions --entry selected.
	entries map[*kernel.Function]bool
	// track is set with --track.
	track    *tracker
	capture  backend.Capture
	attached *backend.Attachment
	fork     link.Link
	reader   ringReader
	exit     link.Link
	decoder  *event.Decoder
	// layouts are the targets' plans as the capture program reads them.
	layouts   []bpf.CapturePlan
	planSkips skip.Reasons
	detached  func(done, total int)
	closeOnce sync.Once
	stopOnce  sync.Once
	// readMu makes Read, Discard and Close's draining take turns: it
	// guards the reader's use and rec, the decoder, watched and unwatch.
	readMu sync.Mutex
	rec    ringbuf.Record
	// watched is the context Read was last given, and unwatch stops
	// watching it (see watch).
	watched context.Context
	unwatch func() bool
	// closing is set once Close begins: Read returns ErrClosed from then
	// on, and Stop does nothing.
	closing atomic.Bool
	// received, discarded and malformed count the records read from the
	// ring buffer: all of them; those dropped unread by Discard; those
	// Read skipped, as they did not decode.
	received, discarded, malformed atomic.Uint64
	// mu guards the maps' lifetime and what Close leaves: Stats,
	// FunctionStats and Stop read the maps under its read lock, Close
	// closes them under its lock.
	mu sync.RWMutex
	// closed says Close read the final figures and closed the maps.
	closed bool
	// final holds the counters read in Close, after detaching.
	final counts
	// aggregate says the calls are counted in the kernel; finalStats
	// holds their figures read in Close, after detaching.
	aggregate  bool
	finalStats []FunctionStats
	// finalStackCounts holds the counts by stack read in Close, and
	// stackMu makes StackCounts take turns with the symbolisers.
	finalStackCounts []StackCount
	stackMu          sync.Mutex
	// unfollow stops followMappings, and waits until it has.
	unfollow func()
	// release lets the kernel's catalogue go, unless another session
	// holds it.
	release func()
	// selection is what Selection returns, made on first use.
	selection func() *Selection
}

// Open selects the functions, loads the capture program, attaches it and
// arms it: calls are traced until Stop or Close. It checks cfg with
// Validate first, before it reads anything of the kernel's, then uses
// Config.BTF (UseBTF).
func Open(ctx context.Context, cfg Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := UseBTF(cfg.BTF, cfg.BTFDir); err != nil {
		return nil, err
	}
	if err := liveHostFacts().checkCapabilities(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cat, release, err := holdCatalogue(cfg)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, cat, cfg, backend.LiveProbe)
	if err != nil {
		defer release()
		if s == nil {
			return nil, publicError(err)
		}
		// Attaching began: say how far it got.
		c, _ := s.counts()
		s.close()
		return nil, &OpenError{Stats: statsOf(c), Err: publicError(err)}
	}
	// Tracing is set up: the kernel's lists it read, if any, are kept
	// for the next trace meanwhile (Close waits for them).
	cat.WriteCache()
	s.release = release
	s.Backend = Backend(s.backend.Name)
	s.selection = sync.OnceValue(func() *Selection { return newSelection(s.sel, cfg.Capture) })
	return s, nil
}

// holdCatalogue holds the kernel's catalogue for a session of cfg: only
// the functions it names when every pattern names its functions in full
// (four times faster to load; see kernel.LoadNames), else every function.
func holdCatalogue(cfg Config) (*kernel.Catalogue, func(), error) {
	names, ok := selector.LiteralNames(cfg.Patterns)
	if entries, entriesOK := selector.LiteralNames(cfg.Entries); ok && (len(cfg.Entries) == 0 || entriesOK) {
		names = append(names, entries...)
		if cfg.Track != "" {
			names = append(names, allLifeFuncs()...)
		}
		return kernel.HoldNames(names, catalogueCache(cfg.CatalogueCache, cfg.NoCache))
	}
	return kernel.Hold(catalogueCache(cfg.CatalogueCache, cfg.NoCache))
}

// publicErrors pairs the errors of the internal packages that callers
// tell apart with this package's.
var publicErrors = []struct{ internal, public error }{
	{backend.ErrNotEnoughMemory, ErrNotEnoughMemory},
	{selector.ErrBadPattern, ErrBadPattern},
	{selector.ErrNoMatch, ErrNoMatch},
}

// publicError makes err match this package's errors: ErrNoBackend,
// said in one line, when no backend can attach; ErrNoPrivileges (with
// its cause) for the kernel's EPERM; those of publicErrors.
func publicError(err error) error {
	for _, e := range publicErrors {
		if errors.Is(err, e.internal) {
			return &matchError{err: err, also: e.public}
		}
	}
	if u := (*backend.Unavailable)(nil); errors.As(err, &u) {
		return explainUnavailable(u)
	}
	return explainPermission(err)
}

// matchError is err, which also matches also.
type matchError struct{ err, also error }

func (e *matchError) Error() string   { return e.err.Error() }
func (e *matchError) Unwrap() []error { return []error{e.err, e.also} }

// Selection returns the functions the patterns selected, and those they
// matched but left out.
func (s *Session) Selection() *Selection { return s.selection() }

// Read blocks until the next call and decodes it into c, reusing c's
// memory. It returns ErrClosed once the session is closed, ctx's error
// once ctx is done, and os.ErrDeadlineExceeded when the deadline set by
// SetDeadline passes first (which tells an idle trace, to flush output).
// The Values in c stay valid until the next Read, but their Fields are
// never reused. A context that is never done, as context.Background(),
// costs nothing per call; another costs a check per call. A record that
// does not decode is skipped, counted in Stats.Malformed: Read goes on
// with the next.
func (s *Session) Read(ctx context.Context, c *Call) error {
	if s.closing.Load() {
		// Not waiting for Close, which holds readMu while it detaches.
		return ErrClosed
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if s.closing.Load() {
		return ErrClosed
	}
	if ctx.Done() != nil || s.watched != nil {
		if err := s.watch(ctx); err != nil {
			return err
		}
	}
	for {
		if err := s.next(ctx); err != nil {
			return err
		}
		s.received.Add(1)
		if err := s.decode(c); err != nil {
			// A record that does not decode is skipped and counted,
			// not the end of the trace.
			s.malformed.Add(1)
			slog.Debug("record skipped", "err", err)
			continue
		}
		return nil
	}
}

// next reads the next record into s.rec.
func (s *Session) next(ctx context.Context) error {
	for {
		err := s.reader.ReadInto(&s.rec)
		if err == nil {
			return nil
		}
		if errors.Is(err, ringbuf.ErrClosed) {
			return ErrClosed
		}
		if !errors.Is(err, ringbuf.ErrFlushed) {
			return fmt.Errorf("read the ring buffer: %w", err)
		}
		// Close began, or a watched context was done (see watch).
		if s.closing.Load() {
			return ErrClosed
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
	}
}

// decode decodes the record in s.rec into c.
func (s *Session) decode(c *Call) error {
	r, err := event.Parse(s.rec.RawSample)
	if err != nil {
		return err
	}
	if err := s.decoder.Call(&r, c); err != nil {
		return err
	}
	if r.Stack != 0 && s.stacks != nil {
		c.Stack = s.stacks.startAt(r.Stack-1, s.plans[r.Func].Func)
	}
	if r.Ustack != 0 && s.ustacks != nil {
		c.UStack = s.ustacks.frames(c.PID, c.Comm, r.Ustack-1)
	}
	return nil
}

// ringReader is what a session reads the ring buffer with: a
// *ringbuf.Reader, or a fake in tests.
type ringReader interface {
	ReadInto(*ringbuf.Record) error
	Flush() error
	SetDeadline(time.Time)
	Close() error
}

// watch makes a blocked Read return once ctx is done, by flushing the
// reader (SetDeadline would wait for the blocked Read to end), and
// returns ctx's error if it is done.
func (s *Session) watch(ctx context.Context) error {
	if ctx != s.watched {
		if s.unwatch != nil {
			s.unwatch()
		}
		s.watched = ctx
		s.unwatch = context.AfterFunc(ctx, func() { s.reader.Flush() })
	}
	return ctx.Err()
}

// Stop stops tracing new calls at once, at any call rate: the program
// ignores entries from now on, while calls in flight still end and are
// sent. The calls already sent stay readable with Read until Close.
func (s *Session) Stop() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closing.Load() {
		// Close disarmed it, or does so now.
		return nil
	}
	var err error
	s.stopOnce.Do(func() {
		if err = s.setArmed(bpf.CaptureArmStateARM_STOPPED); err != nil {
			err = fmt.Errorf("disarm the capture program: %w", err)
		}
	})
	return err
}

// Discard drops the calls waiting in the ring buffer without decoding
// them and returns how many it dropped; Stats counts them as Discarded.
// After Stop it empties the buffer quickly when there is no time left to
// show them. It waits for a Read in progress to return; after Close it
// drops nothing.
func (s *Session) Discard() (int, error) {
	if s.closing.Load() {
		return 0, nil
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if s.closing.Load() {
		return 0, nil
	}
	return s.discard()
}

// discard is Discard, with readMu held.
func (s *Session) discard() (int, error) {
	n := 0
	s.reader.SetDeadline(time.Now())
	defer s.reader.SetDeadline(time.Time{})
	for {
		err := s.reader.ReadInto(&s.rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrClosed):
			return n, nil
		case errors.Is(err, ringbuf.ErrFlushed): // a done context's flush
			continue
		case err != nil:
			return n, err
		}
		n++
		s.received.Add(1)
		s.discarded.Add(1)
	}
}

// SetDeadline makes Read return os.ErrDeadlineExceeded once t has passed
// and no call is waiting; the zero time waits forever. It waits for a
// Read in progress to return.
func (s *Session) SetDeadline(t time.Time) { s.reader.SetDeadline(t) }

// Stats reads the counters. After Close it returns those read once
// everything was detached.
func (s *Session) Stats() (Stats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return statsOf(s.final), nil
	}
	c, err := s.counts()
	return statsOf(c), err
}

// Close detaches everything and frees the programs and maps, and the
// kernel's BTF unless another session holds it. Calls that ended after
// the last Read are counted as Discarded; calls still in flight when
// Close begins are neither sent nor counted. Stats returns the final
// counters after Close.
func (s *Session) Close() error {
	err := s.close()
	s.release()
	return err
}

// close detaches everything and frees the programs and maps.
func (s *Session) close() error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.unfollow != nil {
			s.unfollow()
		}
		s.mu.Lock()
		s.closing.Store(true)
		if s.attached != nil && s.capture.Collection != nil {
			// The programs return at once while the links go: a call
			// ending now would only be discarded below. The exit
			// program on every function slowed kprobe-multi's detach
			// 1.8 times over empty programs' (amd64-7.3).
			errs = append(errs, s.setArmed(bpf.CaptureArmStateARM_OFF))
		}
		s.mu.Unlock()
		if s.reader != nil {
			// A Read blocked in the reader returns ErrClosed.
			errs = append(errs, s.reader.Flush())
		}
		s.readMu.Lock()
		defer s.readMu.Unlock()
		if s.unwatch != nil {
			s.unwatch()
		}
		errs = append(errs, timedStep("close step", "detach", func() error {
			var errs []error
			if s.attached != nil {
				errs = append(errs, s.attached.Close(s.detached))
			}
			for _, l := range []link.Link{s.fork, s.exit} {
				if l != nil {
					errs = append(errs, l.Close())
				}
			}
			return errors.Join(errs...)
		}))
		if s.reader != nil {
			// Nothing runs any more: what is left was never read.
			_, err := s.discard()
			errs = append(errs, err)
		}
		// Stats and FunctionStats wait while the last figures are read
		// and the maps close, then return those figures.
		s.mu.Lock()
		defer s.mu.Unlock()
		errs = append(errs, timedStep("close step", "final counts", func() error {
			c, err := s.counts()
			s.final = c
			if s.aggregate && s.capture.Collection != nil {
				fs, fsErr := s.functionStats()
				s.finalStats = fs
				sc, scErr := s.stackCounts(fs)
				s.finalStackCounts = sc
				err = errors.Join(err, fsErr, scErr)
			}
			return err
		}))
		s.closed = true
		errs = append(errs, timedStep("close step", "free", func() error {
			var err error
			if s.reader != nil {
				err = s.reader.Close()
			}
			if s.capture.Collection != nil {
				s.capture.Collection.Close()
			}
			if s.ustacks != nil {
				s.ustacks.sym.Close()
			}
			return err
		}))
	})
	return errors.Join(errs...)
}

// counts are what the session counted: the capture program's counters
// and the session's own.
type counts struct {
	// Counters holds the capture program's counters, indexed by counter
	// (bpf.CaptureCounterCNT_MISS_EXIT), summed over the CPUs.
	Counters [bpf.CaptureCounterCNT_MAX]uint64
	// Received counts the calls read from the ring buffer, Discarded
	// and Malformed those of them dropped unread by Discard, and skipped
	// by Read as they did not decode.
	Received, Discarded, Malformed uint64
	// Counted counts the calls an aggregating session counted in the
	// kernel.
	Counted uint64
	// TrackEvicted counts, with --track, the objects the kernel's map
	// of tracked objects evicted, being full.
	TrackEvicted uint64
	// ShortUserStack counts, with Config.UserStack, the user stacks cut
	// short.
	ShortUserStack uint64
	// Attached counts the functions attached, Skipped lists the others.
	Attached int
	Skipped  skip.Reasons
	// RecursionMisses counts, per program, the runs the kernel skipped.
	RecursionMisses map[string]uint64
}

// counts reads the counters from the maps, which must be open: with mu
// held, or before the session is returned by Open.
func (s *Session) counts() (counts, error) {
	c := counts{Skipped: skip.Reasons{}, Received: s.received.Load(), Discarded: s.discarded.Load(), Malformed: s.malformed.Load()}
	c.Skipped.Merge(s.planSkips)
	if s.ustacks != nil {
		c.ShortUserStack = s.ustacks.short.Load()
	}
	if s.attached != nil {
		c.Attached = s.attached.Attached
		c.RecursionMisses = s.attached.RecursionMisses()
		c.Skipped.Merge(s.attached.Skipped)
	}
	if s.capture.Collection == nil {
		return c, nil
	}
	var err error
	if c.Counters, err = readCounters(s.capture.Collection.Maps[bpf.CaptureMapCounters]); err != nil {
		return c, fmt.Errorf("read counters: %w", err)
	}
	if s.aggregate {
		if c.Counted, err = s.counted(); err != nil {
			return c, err
		}
	}
	if s.track != nil {
		live, err := trackedNow(s.capture.Collection.Maps[bpf.CaptureMapTracks])
		if err != nil {
			return c, fmt.Errorf("read the tracked objects: %w", err)
		}
		// Exact once nothing runs; while tracing, an estimate.
		gone := c.Counters[bpf.CaptureCounterCNT_TRACK_FREED] + c.Counters[bpf.CaptureCounterCNT_TRACK_EXPIRED] + live
		if tracked := c.Counters[bpf.CaptureCounterCNT_TRACKED]; tracked > gone {
			c.TrackEvicted = tracked - gone
		}
	}
	return c, nil
}

// readCounters reads each of the capture program's per-CPU counters in m
// and sums it over the CPUs.
func readCounters(m *ebpf.Map) ([bpf.CaptureCounterCNT_MAX]uint64, error) {
	var sums [bpf.CaptureCounterCNT_MAX]uint64
	for c := range bpf.CaptureCounterCNT_MAX {
		var perCPU []uint64
		if err := m.Lookup(c, &perCPU); err != nil {
			return sums, fmt.Errorf("counter %d: %w", c, err)
		}
		for _, v := range perCPU {
			sums[c] += v
		}
	}
	return sums, nil
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
