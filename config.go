// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"syscall"
	"time"

	"github.com/trawl-dev/trawl/internal/filter"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/selector"
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
	// return, and MinDuration on the entry call's duration. The
	// tracepoints of Patterns are traced inside entry calls as functions
	// are; an entry pattern cannot be a tracepoint's.
	Entries []string
	// Backend is BackendAuto (see ChooseBackend), BackendFentry (5.17+,
	// cookies 6.0+), BackendKprobeMulti (5.18+; arm64 6.14+ in practice),
	// BackendKprobeSession (6.10+), BackendFsession (7.0+) or
	// BackendTracingMulti (7.2+, x86-64) or BackendKprobe (a classic
	// kprobe per function, for kernels without the others; 5.10+).
	// fsession and tracing-multi attach vmlinux functions only. With
	// Entries, fentry's programs run in fsession's place, and
	// Session.Backend says BackendFentry.
	Backend Backend
	// BTF, if set, is a file holding the kernel's BTF, for a kernel
	// without BTF of its own (no /sys/kernel/btf): raw BTF (BTFHub's) or
	// an ELF file with a .BTF section. Only the kprobe backends can attach
	// then, and no tracepoint: trampolines and BTF tracepoints attach by
	// the kernel's own BTF. See UseBTF.
	BTF string
	// BTFDir, if set with BTF, is a directory of the modules' BTF, one
	// file per module named by it, as /sys/kernel/btf is laid out.
	BTFDir string
	// PIDs, if set, limits tracing to these processes and their children.
	// They are pids in the calling process's PID namespace, as are those
	// of the calls read (0 for a task outside it); Open refuses a process
	// whose own namespace is nested inside the caller's.
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
	// UserStack takes the user stack of each call's task (Call.UStack),
	// alone or with Stack: the frames its frame pointers lead to, named
	// by the binaries the process has mapped, read from /proc/PID/maps
	// and followed from the kernel's mapping events (perf's, which need
	// CAP_PERFMON: without, a notice), so that a process that exits before
	// its calls are read still has them named. Code built without frame
	// pointers cuts a stack short
	// (Stats.ShortUserStack). Taken when the call returns, which for a
	// call that execs a program is in the new program. Kernel threads
	// have none; a stack the kernel has no room for is counted in
	// Stats.MissUserStack.
	UserStack bool
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
	// filter applies. About 2 KB of kernel memory per function. With
	// Stack or UserStack, the kernel also counts each function's calls by
	// their stacks, read with Session.StackCounts: flame graphs counted
	// in the kernel.
	Aggregate bool
	// StackCounts is how many distinct stacks (a function, its kernel
	// stack, its user stack and their process) an aggregating session
	// with stacks counts calls under, at about 100 bytes of kernel memory
	// each; 0 means 65536. The calls of stacks past them are counted
	// without their stacks (Stats.MissStackCount).
	StackCounts int
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
	// CatalogueCache is the directory, an absolute path, where the
	// kernel's lists of functions (/proc/kallsyms and the traceable list)
	// are kept from one trace to the next in a boot; "" means
	// DefaultCatalogueCache. See ClearCatalogueCache.
	CatalogueCache string
	// NoCache reads the kernel's lists of functions from the kernel,
	// neither reading nor writing the cache.
	NoCache bool
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

// ErrBadConfig is returned by Validate, and so by Open, for a Config that
// cannot describe a trace: a pattern or expression that does not parse,
// a value out of range, settings that cannot go together. Such errors
// are found before anything of the kernel's is read.
var ErrBadConfig = errors.New("bad trace configuration")

// Limits of a Config's values.
const (
	// MaxDepth is the most levels of nested values DecodeOptions.Depth
	// shows; CaptureOptions.Depth is at most one less.
	MaxDepth = 16
	// MaxBytes is the most bytes the capture program copies behind one
	// pointer: the largest CaptureOptions.StructBytes, StringBytes and
	// BufferBytes, and DecodeOptions.MaxBytes.
	MaxBytes = 512
	// MaxCallBytes is the most bytes the capture program copies per
	// call: the largest CaptureOptions.CallBytes.
	MaxCallBytes = 1024
	// MaxCommLen is the longest task name the kernel keeps (Config.Comm).
	MaxCommLen = 15
)

// Validate checks everything about cfg that needs no kernel: the
// patterns, the Filter and Show expressions, the backend's name, every
// value's range and which settings go together. Its errors match
// ErrBadConfig (and ErrBadPattern for a pattern) and name the settings as
// the trawl command's flags do. Open calls it first; the kernel may still
// refuse what Validate accepts (a function that does not exist, a
// feature the kernel lacks).
func (cfg Config) Validate() error {
	bad := func(format string, args ...any) error {
		return &configError{fmt.Errorf(format, args...)}
	}
	if len(cfg.Patterns) == 0 && len(cfg.Entries) == 0 {
		return &configError{&matchError{errors.New("no pattern: say which functions to trace, e.g. trawl 'tcp_*'"), ErrBadPattern}}
	}
	for i, p := range append(slices.Clone(cfg.Patterns), cfg.Entries...) {
		pat, err := selector.Parse(p)
		if err != nil {
			return bad("%w", publicError(err))
		}
		if i >= len(cfg.Patterns) && pat.Tracepoint {
			return bad("--entry %q: a tracepoint's event is no call that others run inside: give --entry functions, and the tracepoint as a pattern", p)
		}
	}
	if err := checkBTF(cfg.BTF, cfg.BTFDir); err != nil {
		return err
	}
	if cfg.Backend != "" && !slices.Contains(Backends, cfg.Backend) {
		return bad("--backend %q: want one of %s", cfg.Backend, backendList())
	}
	for _, pid := range cfg.PIDs {
		if pid <= 0 {
			return bad("process id %d out of range", pid)
		}
	}
	if len(cfg.Comm) > MaxCommLen {
		return bad("--comm %q is longer than the kernel's %d characters", cfg.Comm, MaxCommLen)
	}
	if cfg.CgroupExact && cfg.Cgroup == "" {
		return bad("--cgroup-exact goes with --cgroup")
	}
	if cfg.MinDuration < 0 {
		return bad("--min-duration cannot be negative, got %v", cfg.MinDuration)
	}
	if (len(cfg.Errnos) > 0 || len(cfg.ExceptErrnos) > 0) && !cfg.Errors {
		return bad("--errno needs --errors")
	}
	if len(cfg.Errnos) > 0 && len(cfg.ExceptErrnos) > 0 {
		return bad("--errno takes errors to keep or errors to drop, not both")
	}
	if cfg.Filter != "" {
		if _, err := filter.Parse(cfg.Filter); err != nil {
			return bad("--filter: %w", err)
		}
	}
	if len(cfg.Show) > maxShow {
		return bad("%d --show expressions, at most %d", len(cfg.Show), maxShow)
	}
	for _, src := range cfg.Show {
		if _, err := filter.ParseShow(src); err != nil {
			return bad("--show: %w", err)
		}
	}
	if err := cfg.Capture.validate(); err != nil {
		return bad("%w", err)
	}
	if err := cfg.Decode.validate(); err != nil {
		return bad("%w", err)
	}
	if cfg.RingBufferSize != 0 {
		if err := CheckRingBufferSize(cfg.RingBufferSize); err != nil {
			return bad("--ring-buffer-size: %w", err)
		}
	}
	if cfg.Track == "" && (cfg.TrackTimeout != 0 || cfg.TrackObjects != 0) {
		return bad("--track-timeout and --track-objects need --track")
	}
	if cfg.TrackTimeout < 0 || cfg.TrackObjects < 0 {
		return bad("--track-timeout and --track-objects cannot be negative")
	}
	if cfg.StackCounts < 0 {
		return bad("--stack-counts cannot be negative, got %d", cfg.StackCounts)
	}
	if cfg.StackCounts != 0 && !(cfg.Aggregate && (cfg.Stack || cfg.UserStack)) {
		return bad("--stack-counts needs --stats and --stack")
	}
	if cfg.Track != "" && cfg.Aggregate {
		return bad("--track shows the calls of journeys: it cannot go with --stats")
	}
	if cfg.Track != "" && len(cfg.Entries) > 0 && cfg.Errors {
		return bad("--track cannot go with --entry and --errors (error chains)")
	}
	if err := checkCacheDir(cfg.CatalogueCache, cfg.NoCache); err != nil {
		return bad("%w", err)
	}
	return nil
}

// validate checks the capture options' ranges.
func (c CaptureOptions) validate() error {
	for _, b := range []struct {
		flag string
		n    int
	}{{"struct bytes", c.StructBytes}, {"string bytes", c.StringBytes}, {"--max-bytes", c.BufferBytes}} {
		if b.n < 0 || b.n > MaxBytes {
			return fmt.Errorf("%s must be 1 to %d, got %d", b.flag, MaxBytes, b.n)
		}
	}
	if c.Depth < 0 || c.Depth > MaxDepth-1 {
		return fmt.Errorf("--depth must be 1 to %d, got %d", MaxDepth, c.Depth+1)
	}
	if c.CallBytes < 0 || c.CallBytes > MaxCallBytes {
		return fmt.Errorf("--call-bytes must be 1 to %d, got %d", MaxCallBytes, c.CallBytes)
	}
	for _, b := range c.Buffers {
		if b.Func == "" || b.Arg == "" || b.SizeArg == "" {
			return fmt.Errorf("--buf %s:%s=%s: want FUNC:ARG=SIZEARG", b.Func, b.Arg, b.SizeArg)
		}
	}
	return nil
}

// validate checks the decoding options' ranges.
func (d DecodeOptions) validate() error {
	if d.Depth < 0 || d.Depth > MaxDepth {
		return fmt.Errorf("--depth must be 1 to %d, got %d", MaxDepth, d.Depth)
	}
	if d.MaxBytes < 0 || d.MaxBytes > MaxBytes {
		return fmt.Errorf("--max-bytes must be 1 to %d, got %d", MaxBytes, d.MaxBytes)
	}
	if d.ArrayLen < 0 || d.Fields < 0 {
		return errors.New("array length and fields shown cannot be negative")
	}
	return nil
}

// configError is an error of Validate: it matches ErrBadConfig and what
// err wraps.
type configError struct{ err error }

func (e *configError) Error() string   { return e.err.Error() }
func (e *configError) Unwrap() []error { return []error{ErrBadConfig, e.err} }

// withDefaults returns cfg with Notify and RingBufferSize set.
func (cfg Config) withDefaults() Config {
	if cfg.Notify == nil {
		cfg.Notify = func(n string) { slog.Warn(n) }
	}
	cfg.RingBufferSize = cmp.Or(cfg.RingBufferSize, DefaultRingBufferSize)
	return cfg
}
