// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/session"
	"github.com/trawl-dev/trawl/internal/skip"
)

// Config says what to trace and how.
type Config struct {
	// Patterns select the functions: [!][MODULE:]NAME[(TYPE, ...)], where
	// NAME is a glob or a /regexp/ (see docs/patterns.md).
	Patterns []string
	// Entries, if set, are patterns of entry functions (--entry): the
	// functions of Patterns are traced only while the task is inside a call
	// of one of them, a gate kept in the kernel, so that a call outside
	// costs no ring buffer write. The entry functions are traced too, and
	// Patterns may then be empty. With Errors, only the error chains of
	// entry calls that fail are sent (see Call.Chain): Errnos,
	// ExceptErrnos and a Filter using ret then decide on the entry call's
	// return, and MinDuration on the entry call's duration.
	Entries []string
	// Backend is BackendAuto (see ChooseBackend), BackendFentry (5.17+,
	// cookies 6.0+), BackendKprobeMulti (5.18+; arm64 6.14+ in practice),
	// BackendKprobeSession (6.10+), BackendFsession (7.0+) or
	// BackendTracingMulti (7.2+, x86-64) or BackendKprobe (a classic
	// kprobe per function, for kernels without the others; 5.10+).
	// fsession and tracing-multi attach vmlinux functions only.
	Backend string
	// PIDs, if set, limits tracing to these processes and their children.
	PIDs []int
	// Comm, if set, limits tracing to tasks of this name.
	Comm string
	// Cgroup, if set, limits tracing to tasks in this cgroup v2 directory
	// and its descendants (inside a cgroup namespace, descendants are
	// found by the level the path gives, which counts from the
	// namespace's root: use CgroupExact there).
	Cgroup string
	// CgroupExact limits Cgroup to the cgroup itself, not its descendants.
	CgroupExact bool
	// MinDuration, if set, keeps only calls that take at least this long.
	MinDuration time.Duration
	// Errors keeps only calls that return an error: a negative errno from
	// a signed integer, NULL or ERR_PTR from a pointer. Functions whose
	// return value cannot tell an error are left out.
	Errors bool
	// Errnos, if set, keeps only calls that return one of these errors,
	// and ExceptErrnos drops those that return one of these (NULL
	// pointers included); with Entries, they decide on the entry call's
	// error. They need Errors, and cannot go together.
	Errnos, ExceptErrnos []syscall.Errno
	// Stack takes each call's kernel stack at its entry (Call.Stack). The
	// kernel keeps each distinct stack once; a stack it has no room for is
	// counted in Stats.MissStack.
	Stack bool
	// Filter is an expression over arguments and ret that a call must
	// satisfy (see docs/filter.md). Functions lacking a name it
	// uses are left out, with a notice.
	Filter string
	// Show are expressions over arguments and ret, in the language of
	// Filter, whose values each call shows (Call.Show), read in the
	// kernel when the function returns: `sk->__sk_common.skc_num`,
	// `file->f_path.dentry->d_name.name` (a char * or char array is read
	// as a string). At most 8. A function lacking a name an expression
	// uses is traced without it, with a notice.
	Show []string
	// Capture sets how much memory behind pointer arguments is captured.
	Capture CaptureOptions
	// Decode sets how much of each value is decoded and shown.
	Decode DecodeOptions
	// Progress, if set, is told, each time functions are attached or
	// skipped, how many of the total are attached and how many skipped so
	// far. Calls come one at a time.
	Progress func(attached, skipped, total int)
	// DetachProgress, if set, is told how detaching goes in Close: links
	// closed out of how many (thousands of trampolines take minutes to
	// detach under emulation).
	DetachProgress func(done, total int)
	// Notify, if set, receives one-line notices for the user (a degraded
	// source of kernel facts, functions a filter leaves out); else they go
	// to log/slog.
	Notify func(string)
	// RingBufferSize is the size in bytes of the ring buffer the calls go
	// through, a power of two number of pages (see CheckRingBufferSize);
	// 0 means DefaultRingBufferSize. A bigger one drops fewer calls in
	// bursts, at the cost of locked kernel memory.
	RingBufferSize int
	// Aggregate counts the calls in the kernel instead of sending each:
	// per function, the calls, errors by errno and a latency histogram,
	// read with Session.FunctionStats. Exact at any call rate, since
	// nothing goes through the ring buffer (Read returns no call); every
	// filter applies. About 2 KB of kernel memory per function.
	Aggregate bool
	// Track, if set, follows objects of this pointer type through the
	// kernel: "struct sk_buff *", or the name of arguments of the type
	// among the selected functions ("skb", the type then being their most
	// common one). A call that passes every filter (Filter, the task
	// filters, MinDuration, Errors) starts a journey with the objects of
	// the type it receives; from then on, every call receiving one of
	// them is sent, whatever the filters say, and calls receiving none
	// are not (Stats.Untracked). A call that receives a tracked object
	// and returns a pointer of the type (a clone) adds it to the journey.
	// Call.Track names each call's journey, and TrackEnd flags the call
	// that frees its last object: the functions ending the life of its objects (see
	// docs/track.md) are traced whether Patterns select them or not. The
	// selected functions without an argument of the type are left out. A
	// journey starts at the entry of its first call, so that the calls it
	// makes are in it, unless MinDuration, Errors or a Filter using ret
	// decide at its exit. It cannot go with Aggregate, nor with Entries
	// and Errors.
	Track string
	// TrackTimeout, if set, stops tracking an object that no traced call
	// received for this long (Stats.TrackExpired).
	TrackTimeout time.Duration
	// TrackObjects is how many objects are tracked at once, at about 200
	// bytes of kernel memory each; 0 means 16384. The kernel then forgets
	// the least recently used (Stats.TrackEvicted).
	TrackObjects int
}

// CaptureOptions set the bytes captured behind pointer arguments.
type CaptureOptions struct {
	// StructBytes caps the bytes copied behind a pointer to a struct or
	// union; 0 means 256.
	StructBytes int
	// StringBytes caps the bytes copied of a char * string; 0 means 128.
	StringBytes int
	// BufferBytes caps the bytes copied of a sized buffer: a char, u8 or
	// void pointer paired with a size argument by their names (see
	// docs/buffers.md), or named in Buffers; 0 means 64.
	BufferBytes int
	// Buffers name sized buffers the names do not pair.
	Buffers []Buffer
	// Depth is how many pointers deep structs are captured in the
	// kernel: 0 or 1, the structs the arguments point to; 2, also the
	// structs their members point to (list and tree nodes and const
	// tables of operations left out), level by level, in member order;
	// and so on. DecodeOptions.Depth must be above it for them to show.
	Depth int
	// CallBytes caps the bytes a call captures in all: the arguments'
	// memory first, then the structs Depth reaches, which are cut
	// (marked render.Cut) when it runs out; 0 means 1024, the most.
	CallBytes int
}

// Buffer names a sized buffer: argument Arg of function Func points to
// as many bytes as argument SizeArg says.
type Buffer struct {
	Func, Arg, SizeArg string
}

// ParseBuffer parses a Buffer written FUNC:ARG=SIZEARG.
func ParseBuffer(s string) (Buffer, error) {
	b, err := plan.ParseBufferSpec(s)
	return Buffer(b), err
}

// DecodeOptions set how much of each value is shown. Values cut short
// count what they leave out in Value.More.
type DecodeOptions struct {
	// Depth is how many levels of nested structs, unions and arrays are
	// shown; deeper ones are marked Elided. 0 means 2.
	Depth int
	// MaxBytes is the longest string or byte run shown; 0 means 64.
	MaxBytes int
	// ArrayLen is how many array elements are shown; 0 means 8.
	ArrayLen int
	// Fields is how many struct members the default view shows, the
	// non-zero ones first; 0 means 8.
	Fields int
	// Full shows every member in declaration order, zero or not, with
	// every union alternative, and cuts no array or string. Depth still
	// applies.
	Full bool
}

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

// ErrNotAggregating is returned by FunctionStats of a session that sends
// each call (Config.Aggregate not set).
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
type Session struct {
	// Backend is the name of the backend that attached the functions.
	Backend string
	s       *session.Session
	release func()
	// selection is what Selection returns, made on first use.
	selection func() *Selection
}

// Open selects the functions, loads the capture program, attaches it and
// arms it: calls are traced until Stop or Close.
func Open(ctx context.Context, cfg Config) (*Session, error) {
	if err := livePrivilegeFacts().checkCapabilities(); err != nil {
		return nil, err
	}
	icfg, err := cfg.internal()
	if err != nil {
		return nil, err
	}
	cat, release, err := holdCatalogue(cfg)
	if err != nil {
		return nil, err
	}
	s, err := session.Open(ctx, cat, icfg, session.LiveProbe)
	if err != nil {
		defer release()
		if s == nil {
			return nil, publicError(err)
		}
		// Attaching began: say how far it got.
		c, _ := s.Counts()
		s.Close()
		return nil, &OpenError{Stats: statsOf(c), Err: publicError(err)}
	}
	capture := cfg.Capture
	sess := &Session{Backend: s.Backend.Name, s: s, release: release}
	sess.selection = sync.OnceValue(func() *Selection { return newSelection(s.Selection, capture) })
	return sess, nil
}

// holdCatalogue holds the kernel's catalogue for a session of cfg: only
// the functions it names when every pattern names its functions in full
// (four times faster to load; see kernel.LoadNames), else every function.
func holdCatalogue(cfg Config) (*kernel.Catalogue, func(), error) {
	names, ok := selector.LiteralNames(cfg.Patterns)
	if entries, entriesOK := selector.LiteralNames(cfg.Entries); ok && (len(cfg.Entries) == 0 || entriesOK) {
		names = append(names, entries...)
		if cfg.Track != "" {
			names = append(names, session.AllLifeFuncs()...)
		}
		return kernel.HoldNames(names)
	}
	return kernel.Hold()
}

// internal returns the session's configuration, with the defaults
// filled in, or why cfg is wrong.
func (cfg Config) internal() (session.Config, error) {
	notify := cfg.Notify
	if notify == nil {
		notify = func(n string) { slog.Warn(n) }
	}
	if (len(cfg.Errnos) > 0 || len(cfg.ExceptErrnos) > 0) && !cfg.Errors {
		return session.Config{}, errors.New("Errnos and ExceptErrnos need Errors")
	}
	if cfg.Track != "" && cfg.Aggregate {
		return session.Config{}, errors.New("Track sends the calls of journeys: it cannot go with Aggregate")
	}
	if cfg.Track != "" && len(cfg.Entries) > 0 && cfg.Errors {
		return session.Config{}, errors.New("Track cannot go with Entries and Errors (error chains)")
	}
	if cfg.TrackTimeout < 0 || cfg.TrackObjects < 0 {
		return session.Config{}, errors.New("TrackTimeout and TrackObjects cannot be negative")
	}
	ring := cmp.Or(cfg.RingBufferSize, DefaultRingBufferSize)
	if err := CheckRingBufferSize(ring); err != nil {
		return session.Config{}, err
	}
	return session.Config{
		Patterns:       cfg.Patterns,
		Entries:        cfg.Entries,
		Backend:        cfg.Backend,
		PIDs:           cfg.PIDs,
		Comm:           cfg.Comm,
		Cgroup:         cfg.Cgroup,
		Filter:         cfg.Filter,
		CgroupExact:    cfg.CgroupExact,
		Show:           cfg.Show,
		MinDuration:    cfg.MinDuration,
		Errors:         cfg.Errors,
		Errnos:         cfg.Errnos,
		ExceptErrnos:   cfg.ExceptErrnos,
		Stack:          cfg.Stack,
		Budgets:        cfg.Capture.budgets(),
		Values:         decode.Options(cfg.Decode),
		Progress:       cfg.Progress,
		DetachProgress: cfg.DetachProgress,
		Notify:         notify,
		RingBufferSize: ring,
		Aggregate:      cfg.Aggregate,
		Track:          cfg.Track,
		TrackTimeout:   cfg.TrackTimeout,
		TrackObjects:   cfg.TrackObjects,
	}, nil
}

// publicErrors pairs the errors of the internal packages that callers
// tell apart with this package's.
var publicErrors = []struct{ internal, public error }{
	{backend.ErrNotEnoughMemory, ErrNotEnoughMemory},
	{selector.ErrBadPattern, ErrBadPattern},
	{selector.ErrNoMatch, ErrNoMatch},
}

// publicError makes err match this package's errors: ErrNoPrivileges
// (with its cause) for the kernel's EPERM, and those of publicErrors.
func publicError(err error) error {
	for _, e := range publicErrors {
		if errors.Is(err, e.internal) {
			return &matchError{err: err, also: e.public}
		}
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
// costs nothing per call; another costs a check per call.
func (s *Session) Read(ctx context.Context, c *Call) error {
	err := s.s.Read(ctx, c)
	if err != nil && errors.Is(err, session.ErrClosed) {
		return ErrClosed
	}
	return err
}

// SetDeadline makes Read return os.ErrDeadlineExceeded once t has passed
// and no call is waiting; the zero time waits forever.
func (s *Session) SetDeadline(t time.Time) { s.s.SetDeadline(t) }

// Stop stops tracing new calls at once, at any call rate: the program
// ignores entries from now on, while calls in flight still end and are
// sent. The calls already sent stay readable with Read until Close.
func (s *Session) Stop() error { return s.s.Stop() }

// Discard drops the calls waiting in the ring buffer without decoding
// them and returns how many it dropped; Stats counts them as Discarded.
// After Stop it empties the buffer quickly when there is no time left to
// show them.
func (s *Session) Discard() (int, error) { return s.s.Discard() }

// Stats reads the counters. After Close it returns those read once
// everything was detached.
func (s *Session) Stats() (Stats, error) {
	c, err := s.s.Counts()
	return statsOf(c), err
}

// FunctionStats returns, for each function called since the session was
// armed, the figures counted in the kernel by a session with
// Config.Aggregate; ErrNotAggregating for another. After Close it returns
// those read once everything was detached.
func (s *Session) FunctionStats() ([]FunctionStats, error) {
	fs, err := s.s.FunctionStats()
	if errors.Is(err, session.ErrNotAggregating) {
		return nil, ErrNotAggregating
	}
	return fs, err
}

// Close detaches everything and frees the programs and maps, and the
// kernel's BTF unless another session holds it. Calls that ended after
// the last Read are counted as Discarded; calls still in flight when
// Close begins are neither sent nor counted. Stats returns the final
// counters after Close.
func (s *Session) Close() error {
	err := s.s.Close()
	s.release()
	return err
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
