// SPDX-License-Identifier: Apache-2.0

// Package kernel knows the running kernel's functions: which ones exist,
// which can be traced, where they live and what their BTF prototypes are.
//
// A Catalogue joins three sources: kernel BTF (vmlinux and modules, under
// /sys/kernel/btf, or from files: see UseBTF and WithBTF), the traceable
// set from tracefs (available_filter_functions_addrs from 6.5, else
// available_filter_functions joined with /proc/kallsyms) and the
// addresses from /proc/kallsyms. Each messy case of real kernels is kept
// explicit in the Function entries rather than papered over: names at
// several addresses, compiler clones (.isra.0, .constprop.0, .part.0,
// .cold, .llvm.NNN), functions in BTF that cannot be traced, traceable
// functions without BTF, and module functions.
package kernel

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/btf"
)

// Paths of the kernel files, relative to the root of the file system a
// catalogue is loaded from.
const (
	btfDir        = "sys/kernel/btf"
	kallsymsPath  = "proc/kallsyms"
	filterAddrs   = "available_filter_functions_addrs"
	filterNames   = "available_filter_functions"
	vmlinuxModule = "vmlinux"
)

// tracefsDirs are the places tracefs is mounted, newest first.
var tracefsDirs = []string{"sys/kernel/tracing", "sys/kernel/debug/tracing"}

// ErrNoBTF is returned when the kernel has no BTF, and none is given
// from a file (UseBTF).
var ErrNoBTF = errors.New("kernel BTF not found (the kernel needs CONFIG_DEBUG_INFO_BTF=y, or --btf FILE to read it from a file)")

// Source tells where a catalogue learnt which functions are traceable.
type Source int

const (
	// FromFilterAddrs is tracefs's available_filter_functions_addrs (6.5+).
	FromFilterAddrs Source = iota + 1
	// FromFilterNames is available_filter_functions joined with kallsyms.
	FromFilterNames
	// FromKallsymsBTF is the fallback when tracefs cannot be read: every
	// BTF function with a symbol in kallsyms is assumed traceable.
	FromKallsymsBTF
)

func (s Source) String() string {
	switch s {
	case FromFilterAddrs:
		return filterAddrs
	case FromFilterNames:
		return filterNames + " + kallsyms"
	case FromKallsymsBTF:
		return "BTF functions in kallsyms"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Function is one kernel function of the catalogue.
type Function struct {
	// Name is the symbol name, compiler suffix included ("foo.isra.0").
	Name string
	// Module is the module the function lives in, "" for vmlinux.
	Module string
	// Addrs are the function's entry addresses, ascending. A static
	// function defined in several files has several. Nil when the kernel
	// hides addresses or when they cannot be told apart (see AddrNote).
	Addrs []uint64
	// Copies is the number of symbols with this name in the module: more
	// than one for static functions of the same name in several files.
	Copies int
	// BTFID is the type ID of the function's BTF prototype in its BTF
	// object (vmlinux, or the module's split BTF), 0 when no prototype
	// applies (see ProtoNote).
	BTFID btf.TypeID
	// Traceable reports whether ftrace can attach to the function.
	Traceable bool
	// Reason says why the function is not traceable.
	Reason string
	// RetID is, for a compiler clone without a prototype of its own, the
	// type ID of the prototype of the function it was made from, whose
	// return type it keeps (see Return); 0 for others.
	RetID btf.TypeID
	// ProtoNote says why Proto is nil, or how a suffixed symbol was
	// matched to its prototype.
	ProtoNote string
	// AddrNote says why Addrs is nil for a traceable function.
	AddrNote string
	// Event is a tracepoint's event ("sched_process_exec"), "" for a
	// function. A tracepoint's Name is "tp:SUBSYSTEM:EVENT", its BTFID
	// that of its btf_trace_EVENT typedef in vmlinux, and its Proto the
	// arguments its programs read (see Catalogue.Tracepoints).
	Event string
	// Subsystem is a tracepoint's subsystem ("sched").
	Subsystem string

	spec *btf.Spec // the BTF object BTFID or RetID belongs to
	// namesID is a tracepoint's __bpf_trace_ function, whose arguments
	// have names, 0 if none (see tracepointProto).
	namesID btf.TypeID
	proto   *btf.Func // the prototype of a function made by FunctionOf
}

// FunctionOf returns a traceable function of one copy whose prototype is
// proto, for functions made outside a catalogue (tests, fixtures).
func FunctionOf(proto *btf.Func) *Function {
	return &Function{Name: proto.Name, Traceable: true, Copies: 1, proto: proto}
}

// Proto returns the function's BTF prototype, nil when none applies (see
// ProtoNote). Its name lacks any .llvm.NNN suffix of Name. Prototypes are
// read from BTF on first use: a trace needs only those of the functions
// it selects.
func (f *Function) Proto() *btf.Func {
	if f.spec == nil || f.BTFID == 0 {
		return f.proto
	}
	if f.IsTracepoint() {
		typ, err := f.spec.TypeByID(f.BTFID)
		if err == nil {
			var named *btf.Func
			if f.namesID != 0 {
				t, _ := f.spec.TypeByID(f.namesID)
				named, _ = t.(*btf.Func)
			}
			var fn *btf.Func
			if fn, err = tracepointProto(f.Event, typ, named); err == nil {
				return fn
			}
		}
		slog.Warn("reading a tracepoint's BTF prototype", "tracepoint", f.Name, "err", err)
		return nil
	}
	return f.funcByID(f.BTFID)
}

// Return returns the return type of a function without a prototype
// that is known all the same: a compiler clone's that keeps the return
// type of the function it was made from (RetID). ok is false when
// it is not known.
func (f *Function) Return() (t btf.Type, ok bool) {
	if f.spec == nil || f.RetID == 0 {
		return nil, false
	}
	base := f.funcByID(f.RetID)
	if base == nil {
		return nil, false
	}
	proto, ok := base.Type.(*btf.FuncProto)
	if !ok {
		return nil, false
	}
	return proto.Return, true
}

func (f *Function) funcByID(id btf.TypeID) *btf.Func {
	typ, err := f.spec.TypeByID(id)
	if err != nil {
		slog.Warn("reading a BTF prototype", "function", f.Name, "module", f.Module, "err", err)
		return nil
	}
	fn, _ := typ.(*btf.Func)
	return fn
}

// HasProto reports whether the function has a BTF prototype, without
// decoding it: Proto is nil when it has none (and when decoding fails).
func (f *Function) HasProto() bool { return f.proto != nil || f.spec != nil && f.BTFID != 0 }

// Catalogue is the set of kernel functions. It is immutable once loaded and
// safe for concurrent use.
type Catalogue struct {
	funcs       []Function
	tracepoints []Function
	byName      map[string][]int
	specs       map[string]*btf.Spec
	traceable   []Symbol
	source      Source
	notice      string
	symbols     *Symbolizer
	// some is where a catalogue of some functions (LoadNames) was read
	// from, nil for one of every function.
	some fs.FS
	// keep writes the lists the catalogue was read from to a Cache, nil
	// when there is nothing to write.
	keep *cacheWrite
}

// Symbolizer symbolises addresses with the kallsyms the catalogue was
// loaded from.
func (c *Catalogue) Symbolizer() *Symbolizer { return c.symbols }

// Functions returns every function, sorted by name then module.
func (c *Catalogue) Functions() []Function { return c.funcs }

// Lookup returns the functions called name (one per module that has it).
func (c *Catalogue) Lookup(name string) []*Function {
	var fns []*Function
	for _, i := range c.byName[name] {
		fns = append(fns, &c.funcs[i])
	}
	return fns
}

// Spec returns the BTF of a module ("" for vmlinux), nil if not loaded.
func (c *Catalogue) Spec(module string) *btf.Spec { return c.specs[module] }

// Traceable returns the traceable set the catalogue used, exactly as read
// from Source: one entry per line of available_filter_functions(_addrs),
// or per kallsyms symbol in the fallback.
func (c *Catalogue) Traceable() []Symbol { return c.traceable }

// AllTraceable returns every traceable function the kernel lists, as
// Traceable does for a catalogue of every function. A catalogue of some
// functions reads the list again, names alone, leaving out none; it
// returns nil if it cannot (tracefs unreadable).
func (c *Catalogue) AllTraceable() []Symbol {
	if c.some == nil {
		return c.traceable
	}
	syms, _, _, err := readTracefs(c.some, nil, []traceableFile{traceableFiles[1], traceableFiles[0]})
	if err != nil {
		return nil
	}
	return syms
}

// Source tells where the traceable set came from.
func (c *Catalogue) Source() Source { return c.source }

// Notice is a one-line message for the user about a degraded source
// (tracefs unreadable, addresses hidden), "" when all is well.
func (c *Catalogue) Notice() string { return c.notice }

// Load builds a catalogue from the kernel files under fsys, a file system
// laid out like / (sys/kernel/btf/vmlinux, proc/kallsyms,
// sys/kernel/tracing/...). Tests pass fixtures; Hold passes the real root.
func Load(fsys fs.FS) (*Catalogue, error) {
	c, _, err := loadKept(fsys, nil, nil)
	return c, err
}

// LoadNames builds the catalogue of only the functions called names (in
// vmlinux and every module) and their compiler clones, from the same
// files: a trace of functions named in full needs no more, and skipping
// the rest of the kernel's symbols takes most of the catalogue's time off
// its start. Its Symbolizer reads every symbol at its first use.
func LoadNames(fsys fs.FS, names []string) (*Catalogue, error) {
	c, _, err := loadKept(fsys, newNameSet(names), nil)
	return c, err
}

// lists are the kernel's lists of symbols a catalogue is read from, as
// the kernel wrote them: /proc/kallsyms and the traceable list of tracefs
// (source says which file).
type lists struct {
	kallsyms  []byte
	traceable []byte
	source    Source
}

// loadKept builds a catalogue of the functions keep keeps, or of all of
// them (keep nil), from the lists keptLists returns while vmlinux's BTF
// loads, or, when it is nil or returns nil, from those it reads from fsys. It
// returns the lists it read from fsys, nil if none or when tracefs could
// not be read.
func loadKept(fsys fs.FS, keep *nameSet, keptLists func() *lists) (*Catalogue, *lists, error) {
	var (
		vmlinux  *btfObject
		ksyms    []Symbol
		symbols  *Symbolizer
		traced   []Symbol
		read     = &lists{}
		tfsError error
	)
	start := time.Now()
	var wg sync.WaitGroup
	var btfErr, symErr error
	var btfTook, symTook time.Duration
	wg.Go(func() {
		vmlinux, btfErr = loadBTF(fsys, vmlinuxModule, nil, keep)
		btfTook = time.Since(start)
	})
	var kept *lists
	if keptLists != nil {
		kept = keptLists()
	}
	// The kernel writes kallsyms and the traceable list line by line as
	// they are read, which takes most of the catalogue's time: read both
	// at once, or not at all when they were kept.
	wg.Go(func() {
		var data []byte
		if kept != nil {
			data = kept.kallsyms
		} else {
			var err error
			if data, err = readFile(fsys, kallsymsPath); err != nil {
				symErr = fmt.Errorf("read kernel symbols: %w", err)
				return
			}
			read.kallsyms = data
		}
		if ksyms, symbols, symErr = parseKallsyms(data, keep); symErr == nil && symbols == nil {
			symbols = lazySymbolizer(data)
		}
		symTook = time.Since(start)
	})
	wg.Go(func() {
		if kept != nil {
			traced, tfsError = parseFilterFunctions(kept.traceable, kept.source == FromFilterAddrs, keep)
			return
		}
		files := traceableFiles
		if keep != nil {
			// The names alone: the kernel writes them in about half the
			// time, and they tell the copies of a name apart unless
			// some are not traceable (below).
			files = []traceableFile{files[1], files[0]}
		}
		traced, read.source, read.traceable, tfsError = readTracefs(fsys, keep, files)
	})
	wg.Wait()
	if err := cmp.Or(btfErr, symErr); err != nil {
		return nil, nil, err
	}
	if kept != nil {
		read = nil
	}
	source := cmp.Or(kept, read).source
	if source == FromFilterNames && keep != nil && someCopiesUntraceable(traced, ksyms) {
		if t, s, data, err := readTracefs(fsys, keep, traceableFiles[:1]); err == nil {
			traced, source = t, s
			if read != nil {
				read.source, read.traceable = s, data
			}
		}
	}

	b := builder{
		objects: map[string]*btfObject{"": vmlinux},
		ksyms:   groupSymbols(ksyms),
		keep:    keep,
	}
	listsTook := time.Since(start)
	b.loadModules(fsys, vmlinux, ksyms)
	modulesTook := time.Since(start)
	c := &Catalogue{specs: make(map[string]*btf.Spec, len(b.objects)), source: source, traceable: traced, symbols: symbols}
	for module, obj := range b.objects {
		c.specs[module] = obj.spec
	}
	if keep != nil {
		c.some = fsys
	}
	if tfsError != nil {
		read = nil
		c.source = FromKallsymsBTF
		c.traceable = b.btfSymbols(ksyms)
		c.notice = fmt.Sprintf("tracefs is not readable (%v): assuming every BTF function in /proc/kallsyms is traceable", tfsError)
		slog.Debug("tracefs unreadable, falling back to BTF functions in kallsyms", "err", tfsError)
	}
	if hidden := addrsHidden(ksyms); hidden {
		read = nil
		msg := "/proc/kallsyms hides addresses (run as root): functions can be attached by name only"
		c.notice = strings.TrimPrefix(c.notice+"; "+msg, "; ")
	}
	c.funcs = b.build(c.traceable, c.source)
	buildTook := time.Since(start)
	c.tracepoints = readTracepoints(fsys, vmlinux)
	slog.Debug("catalogue steps, from the start", "vmlinux_btf", round(btfTook), "kallsyms", round(symTook),
		"lists", round(listsTook), "modules", round(modulesTook), "build", round(buildTook), "tracepoints", round(time.Since(start)))
	c.byName = make(map[string][]int, len(c.funcs))
	for i, f := range c.funcs {
		c.byName[f.Name] = append(c.byName[f.Name], i)
	}
	return c, read, nil
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// readFile reads a file whole into a slice of its size. Written by hand
// because fs.ReadFile, for a file whose size it cannot know beforehand
// (those of /proc and tracefs), grows its buffer by a quarter at a time
// from 512 bytes, copying kallsyms (10 MB) about four times over, and a
// buffer grown by doubling keeps up to twice the text for as long as
// the catalogue's names point into it (16 MB for kallsyms): this reads
// 1 MB chunks and joins them once.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var chunks [][]byte
	for {
		chunk := make([]byte, 1<<20)
		n, err := io.ReadFull(f, chunk)
		chunks = append(chunks, chunk[:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return bytes.Join(chunks, nil), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// traceableFile is a tracefs file listing the traceable functions.
type traceableFile struct {
	name   string
	source Source
}

// traceableFiles are the files listing the traceable functions, best
// first: the addresses tell apart the copies of a name.
var traceableFiles = []traceableFile{{filterAddrs, FromFilterAddrs}, {filterNames, FromFilterNames}}

// readTracefs reads the traceable set from the first of files that a
// tracefs mount has (with keep, the part of it keep keeps). It returns the
// file's contents too.
func readTracefs(fsys fs.FS, keep *nameSet, files []traceableFile) ([]Symbol, Source, []byte, error) {
	var errs []error
	for _, dir := range tracefsDirs {
		for _, f := range files {
			data, err := readFile(fsys, path.Join(dir, f.name))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			syms, err := parseFilterFunctions(data, f.source == FromFilterAddrs, keep)
			if err != nil {
				return nil, 0, nil, err
			}
			if len(syms) == 0 && keep == nil {
				errs = append(errs, fmt.Errorf("%s/%s is empty", dir, f.name))
				continue
			}
			return syms, f.source, data, nil
		}
	}
	return nil, 0, nil, firstInteresting(fsys, errs)
}

// someCopiesUntraceable says whether kallsyms has a name of traced more
// often than traced does: which of its copies are traceable is then known
// only from their addresses.
func someCopiesUntraceable(traced, ksyms []Symbol) bool {
	n := make(map[symKey]int, len(traced))
	for _, s := range traced {
		n[symKey{s.Module, s.Name}]++
	}
	for _, s := range ksyms {
		k := symKey{s.Module, s.Name}
		if c, ok := n[k]; ok {
			if c == 0 {
				return true
			}
			n[k] = c - 1
		}
	}
	return false
}

// firstInteresting picks the error to show the user among the failed
// attempts: a permission problem beats a missing file, and tracefs
// mounted nowhere (its mount points empty) says how to mount it.
func firstInteresting(fsys fs.FS, errs []error) error {
	for _, err := range errs {
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, dir := range tracefsDirs {
		if entries, _ := fs.ReadDir(fsys, dir); len(entries) > 0 {
			return errors.New("no available_filter_functions under /sys/kernel/tracing or /sys/kernel/debug/tracing")
		}
	}
	return errors.New("not mounted: mount -t tracefs tracefs /sys/kernel/tracing")
}

func addrsHidden(syms []Symbol) bool {
	for _, s := range syms {
		if s.Addr != 0 {
			return false
		}
	}
	return len(syms) > 0
}

// btfObject is the BTF of vmlinux or of one module, with its functions
// indexed by name.
type btfObject struct {
	spec    *btf.Spec
	funcs   btfFuncs
	strings btfStrings // what a module's split BTF needs of vmlinux's
}

// loadBTF loads the BTF of vmlinux (base == nil) or of a module, with
// the functions keep keeps.
func loadBTF(fsys fs.FS, module string, base *btfObject, keep *nameSet) (*btfObject, error) {
	data, err := fs.ReadFile(fsys, path.Join(btfDir, module))
	if errors.Is(err, fs.ErrNotExist) && base == nil {
		return nil, ErrNoBTF
	}
	if err == nil {
		data, err = rawBTF(data)
	}
	if err != nil {
		return nil, fmt.Errorf("read BTF of %s: %w", module, err)
	}
	obj := &btfObject{}
	var baseStrings *btfStrings
	switch {
	case base == nil && fsys == liveFS():
		// The BTF the process's loads and probes use: decoding it takes
		// longer than reading it (a quarter of a second under emulation),
		// and a copy is private (module BTF decoded on it writes to it).
		if obj.spec, err = KernelTypes(); err == nil {
			obj.spec = obj.spec.Copy()
		}
	case base == nil:
		obj.spec, err = btf.LoadSpecFromReader(bytes.NewReader(data))
	default:
		obj.spec, err = btf.LoadSplitSpecFromReader(bytes.NewReader(data), base.spec)
		baseStrings = &base.strings
	}
	if err != nil {
		return nil, fmt.Errorf("parse BTF of %s: %w", module, err)
	}
	if obj.funcs, obj.strings, err = scanFuncs(data, baseStrings, keep); err != nil {
		return nil, fmt.Errorf("parse BTF of %s: %w", module, err)
	}
	return obj, nil
}
