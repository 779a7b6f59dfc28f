// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/event"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/record"
	"github.com/trawl-dev/trawl/internal/skip"
	"github.com/trawl-dev/trawl/internal/ustack"
)

// errTooManySlots leaves out functions whose arguments take more slots
// than the capture program reads.
var errTooManySlots = fmt.Errorf("more than the %d argument slots trawl reads", record.MaxSlots)

// open traces the functions of cat that cfg, validated and with its
// defaults, selects: it selects them, chooses the backend, plans their
// capture, loads the capture program, attaches it and arms it. When it
// fails (or is cancelled) after it began to attach, it returns the
// session with the error: its counts say what was attached and skipped,
// and close detaches it all again.
//
// Two pairs of steps run side by side, each on its own CPU where there
// are two: planning and loading (see planAndLoad), then attaching, mostly
// kernel work for the backends that attach every function at once, and
// filling the program's maps and readying the decoding of the calls,
// which the program, attached unarmed, neither reads nor sends yet.
func open(ctx context.Context, cat *kernel.Catalogue, cfg Config, probe backend.Probe) (_ *Session, err error) {
	if n := cat.Notice(); n != "" {
		cfg.Notify(n)
	}
	s := &Session{planSkips: skip.Reasons{}, detached: cfg.DetachProgress, aggregate: cfg.Aggregate}
	if err := timed("choose", func() error { return s.choose(cat, cfg, probe) }); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && s.attached == nil {
			s.close()
		}
	}()
	if err := s.planAndLoad(cat, cfg); err != nil {
		return nil, err
	}
	// The program, attached unarmed, reads neither the layouts nor the
	// decoding's state before arm: both are readied while it attaches.
	var ready sync.WaitGroup
	var fillErr error
	ready.Go(func() {
		fillErr = timed("fill", s.fill)
		s.ready(cat, cfg)
	})
	err = timed("attach", func() error { return s.attach(ctx, cfg.Progress) })
	ready.Wait()
	s.targets = nil // the plans stay in s.plans; their code is in the kernel
	if err = cmp.Or(err, fillErr); err != nil {
		if s.attached != nil {
			return s, err
		}
		return nil, err
	}
	if err := timed("arm", s.arm); err != nil {
		return s, err
	}
	return s, nil
}

// planAndLoad plans the capture of the selected functions and loads the
// capture program, side by side unless the program takes code per
// function (--filter, --show, --track), which needs the plans first. Its
// maps are then sized for the most targets planning can keep.
func (s *Session) planAndLoad(cat *kernel.Catalogue, cfg Config) error {
	var spec *ebpf.CollectionSpec
	prepare := func(n int, coded []backend.Target) error {
		return timed("prepare", func() (err error) {
			spec, err = s.prepare(cat, cfg, n, coded)
			return err
		})
	}
	if s.flt.expr != nil || len(s.show.exprs) > 0 || s.track != nil {
		if err := timed("plan", func() error { return s.plan(cfg) }); err != nil {
			return err
		}
		if err := prepare(len(s.targets), s.targets); err != nil {
			return err
		}
		return timed("load", func() error { return s.load(spec, cfg) })
	}
	// Readying the program reads the catalogue's BTF (its relocations),
	// which planning decodes: not at once, as cilium/ebpf v0.22 decodes a
	// module's types into those of vmlinux without holding their lock.
	if err := prepare(s.mostTargets(), nil); err != nil {
		return err
	}
	var planErr error
	var planning sync.WaitGroup
	planning.Go(func() { planErr = timed("plan", func() error { return s.plan(cfg) }) })
	loadErr := timed("load", func() error { return s.load(spec, cfg) })
	planning.Wait()
	// Planning's errors say what is wrong with the trace itself.
	return cmp.Or(planErr, loadErr)
}

// mostTargets is how many targets planning can keep at most, known before
// it runs: the selected functions, less, for trampolines, those without a
// BTF prototype.
func (s *Session) mostTargets() int {
	n := len(s.sel.Selected)
	if s.backend.Family == plan.Trampoline {
		n -= withoutProto(s.sel.Selected)
	}
	return max(n, 1)
}

// timed runs one step of Open and logs how long it took (trawl --debug).
func timed(step string, run func() error) error {
	return timedStep("open step", step, run)
}

// timedStep runs one step of Open or Close and logs how long it took,
// as msg (trawl --debug).
func timedStep(msg, step string, run func() error) error {
	start := time.Now()
	err := run()
	slog.Debug(msg, "step", step, "took", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// choose selects the functions and the backend.
func (s *Session) choose(cat *kernel.Catalogue, cfg Config, probe backend.Probe) error {
	flt, err := newFilters(cfg, cat)
	if err != nil {
		return err
	}
	s.flt = flt
	if s.show, err = newShows(cfg.Show, cat); err != nil {
		return err
	}
	if s.sel, s.entries, err = selectWithEntries(cat, cfg.Patterns, cfg.Entries); err != nil {
		return err
	}
	if err := checkTracepoints(s.sel.Selected); err != nil {
		return err
	}
	if cfg.Track != "" {
		if s.track, err = newTracker(cfg.Track, s.sel.Selected); err != nil {
			return err
		}
		s.track.addLifeFuncs(cat, s.sel)
	}
	functions := selectedFunctions(s.sel.Selected)
	if s.backend, _, err = chooseBackend(cfg, functions, probe); err != nil {
		return err
	}
	if s.track != nil && s.backend == backend.Fentry {
		// fentry's programs before 5.17 (fentry_one) read the arguments
		// they save, not those --track looks for in other calls.
		if err := features.FuncArgHelpers(); err != nil {
			return fmt.Errorf("--track with the fentry backend: %w (choose the kprobe backend)", err)
		}
	}
	if cfg.Cgroup != "" && !cfg.CgroupExact {
		if err := features.AncestorCgroup(s.backend.Family == plan.Kprobe); err != nil {
			return fmt.Errorf("--cgroup %s takes its descendants in, which the %s backend cannot on this kernel: use --cgroup-exact: %w", cfg.Cgroup, s.backend.Name, err)
		}
	}
	return s.backend.Fits(len(functions))
}

// checkTracepoints refuses tracepoints with the kernel's BTF from a
// file: they attach as tp_btf programs, by the kernel's own BTF.
func checkTracepoints(selected []*kernel.Function) error {
	i := slices.IndexFunc(selected, (*kernel.Function).IsTracepoint)
	if i < 0 || kernel.External() == nil {
		return nil
	}
	return fmt.Errorf("%w, which BTF tracepoints attach by (%s selected; trawl reads its types from %s)", kernel.ErrExternalBTF, selected[i].Name, kernel.BTFOrigin())
}

// selectedFunctions returns the selected functions, leaving out the
// tracepoints, which AttachTracepoints attaches whichever the backend.
func selectedFunctions(selected []*kernel.Function) []*kernel.Function {
	var fns []*kernel.Function
	for _, fn := range selected {
		if !fn.IsTracepoint() {
			fns = append(fns, fn)
		}
	}
	return fns
}

// splitTargets parts targets into the functions the backend attaches and
// the tracepoints.
func splitTargets(targets []backend.Target) (functions, tracepoints []backend.Target) {
	for _, t := range targets {
		if t.Plan.Func.IsTracepoint() {
			tracepoints = append(tracepoints, t)
		} else {
			functions = append(functions, t)
		}
	}
	return functions, tracepoints
}

// plan plans the capture of each selected function the backend can
// attach and the filters keep, and lists the others as skipped.
func (s *Session) plan(cfg Config) error {
	arch, err := plan.HostArch()
	if err != nil {
		return err
	}
	version, err := plan.HostKernel()
	if err != nil {
		return err
	}
	sel := s.sel
	planner := plan.NewPlanner(cfg.Capture.budgets())
	s.targets = make([]backend.Target, 0, len(sel.Selected))
	s.plans = make([]*plan.Plan, 0, len(sel.Selected))
	counted := map[*plan.Arg][]plan.Arg{}
	for _, fn := range sel.Selected {
		p, err := planner.Plan(fn)
		if err == nil {
			err = p.Attachable(s.backend.Family, arch, version)
		}
		if err == nil && p.NumSlots > record.MaxSlots {
			err = fmt.Errorf("%w: %d", errTooManySlots, p.NumSlots)
		}
		if err != nil {
			s.planSkips.Add(skip.Reason(err), fn.Name)
			continue
		}
		if s.track != nil && !p.MarkTrack(s.track.isType, s.track.life[fn.Name]) {
			s.planSkips.Add(s.track.skipReason(), fn.Name)
			continue
		}
		if cfg.Aggregate && cfg.Filter == "" {
			// Only counted: no memory behind the arguments is needed.
			p.Args = countedArgs(counted, p.Args)
			p.Deep, p.Packets, p.Windows, p.Members = nil, nil, nil, nil
		}
		body, reason := s.flt.compile(p)
		if reason != "" && s.track != nil {
			// It cannot start a journey, but it can be in one.
			body, reason = s.track.cannotStart(reason, fn.Name, s.flt.expr != nil), ""
		}
		if reason != "" {
			s.planSkips.Add(reason, fn.Name)
			s.flt.leaveOut(reason, fn.Name)
			continue
		}
		t := backend.Target{ID: uint32(len(s.plans)), Plan: p, Filter: body, Entry: s.entries[fn]}
		if err := s.show.target(&t); err != nil {
			return err
		}
		s.targets = append(s.targets, t)
		s.plans = append(s.plans, p)
	}
	s.flt.notify(cfg.Notify)
	s.show.notify(cfg.Notify)
	if s.track != nil {
		s.track.notify(cfg.Notify)
	}
	if err := s.checkEntries(); err != nil {
		return err
	}
	if len(s.targets) == 0 && len(s.flt.skips) > 0 {
		return s.flt.noneLeft(len(sel.Selected))
	}
	if len(s.targets) == 0 {
		return fmt.Errorf("none of the %d selected functions can be attached with %s: %s", len(sel.Selected), s.backend.Name, strings.Join(s.planSkips.Summary(1), "; "))
	}
	return s.wire(arch)
}

// countedArgs returns args with nothing to capture behind them, for a
// function whose calls are only counted. The planner shares one slice of
// arguments among the functions of a prototype (25,000 prototypes for
// 56,000 functions), and so does countedArgs, by seen: a copy each took
// 14.5 MB with every function traced.
func countedArgs(seen map[*plan.Arg][]plan.Arg, args []plan.Arg) []plan.Arg {
	if len(args) == 0 {
		return args
	}
	if c, ok := seen[&args[0]]; ok {
		return c
	}
	c := slices.Clone(args)
	for i := range c {
		c[i].Budget = 0
	}
	seen[&args[0]] = c
	return c
}

// wire lays out the targets' plans as the capture program reads them, for
// fill to store.
func (s *Session) wire(arch plan.Arch) error {
	s.layouts = make([]bpf.CapturePlan, len(s.targets))
	for i, t := range s.targets {
		w, err := record.Wire(t.Plan, arch)
		if err != nil {
			return err
		}
		if t.Show != nil {
			w.Flags |= uint16(bpf.CapturePlanFlagPLAN_SHOW)
		}
		if s.entries[t.Plan.Func] {
			w.Flags |= planEntry
		}
		s.layouts[i] = w
	}
	return nil
}

// prepare readies the capture program for at most n targets, and puts
// into it the code of the targets coded (--filter, --show, --track),
// which have been planned.
func (s *Session) prepare(cat *kernel.Catalogue, cfg Config, n int, coded []backend.Target) (*ebpf.CollectionSpec, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, err
	}
	if err := features.Base(); err != nil {
		return nil, err
	}
	spec, err := bpf.CaptureSpec()
	if err != nil {
		return nil, err
	}
	if err := configureLegacy(spec); err != nil {
		return nil, err
	}
	if err := configure(spec, cfg, n); err != nil {
		return nil, err
	}
	if s.namespaced, err = configurePIDNamespace(spec, cfg); err != nil {
		return nil, err
	}
	if err := s.show.configure(spec); err != nil {
		return nil, err
	}
	if err := configureChains(spec, cfg); err != nil {
		return nil, err
	}
	if err := configureStacks(spec, cfg); err != nil {
		return nil, err
	}
	if err := configureTrack(spec, cfg); err != nil {
		return nil, err
	}
	if err := s.flt.configure(spec, coded); err != nil {
		return nil, err
	}
	if spec, err = leanest(spec); err != nil {
		return nil, err
	}
	if err := configureGlobals(spec); err != nil {
		return nil, err
	}
	if err := backend.Relocate(spec, cat.Spec("")); err != nil {
		return nil, err
	}
	if prepare := s.backend.Prepare; prepare != nil {
		if err := prepare(spec, selectedFunctions(s.sel.Selected)); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// load loads the maps of spec and the programs the backend keeps.
func (s *Session) load(spec *ebpf.CollectionSpec, cfg Config) error {
	keep := slices.Clone(s.backend.Keeps)
	if len(cfg.PIDs) > 0 {
		// Only a trace of some processes follows their forks and exits
		// (followPIDs): two verifier runs less for the others.
		fork, exit := taskPrograms()
		keep = append(keep, fork, exit)
	}
	trimmed := spec.Copy()
	for p := range trimmed.Programs {
		if !slices.Contains(keep, p) {
			delete(trimmed.Programs, p)
		}
	}
	contents := takeContents(trimmed)
	coll, err := ebpf.NewCollectionWithOptions(trimmed, kernel.LoadOptions(nil))
	if err != nil {
		if ve := (*ebpf.VerifierError)(nil); errors.As(err, &ve) {
			slog.Debug("verifier log", "log", fmt.Sprintf("%+v", ve))
		}
		return fmt.Errorf("load the capture program: %w", err)
	}
	s.capture = backend.Capture{Spec: spec, Collection: coll}
	logVerified(coll)
	for name, kvs := range contents {
		if err := fillMap(coll.Maps[name], kvs); err != nil {
			return fmt.Errorf("fill map %s: %w", name, err)
		}
	}
	if len(cfg.PIDs) > 0 {
		if err := s.followPIDs(cfg.PIDs); err != nil {
			return err
		}
	}
	reader, err := ringbuf.NewReader(coll.Maps[bpf.CaptureMapEvents])
	if err != nil {
		// s.reader stays nil: not an interface holding a nil pointer.
		return fmt.Errorf("read the ring buffer: %w", err)
	}
	s.reader = reader
	return nil
}

// fill stores the targets' capture layouts, and what the backend's
// programs find them by, in the loaded maps.
func (s *Session) fill() error {
	coll := s.capture.Collection
	// One batch for all layouts: one syscall per function took seconds
	// for every function under emulation.
	ids := make([]uint32, len(s.targets))
	for i, t := range s.targets {
		ids[i] = t.ID
	}
	if _, err := coll.Maps[bpf.CaptureMapPlans].BatchUpdate(ids, s.layouts, nil); err != nil {
		return fmt.Errorf("store the capture layouts: %w", err)
	}
	s.layouts = nil // 8 MB with every function, and the kernel has them now
	if functions, _ := splitTargets(s.targets); s.backend.Fill != nil && len(functions) > 0 {
		return s.backend.Fill(coll, functions)
	}
	return nil
}

// attach attaches the capture program to the functions with the backend,
// and to the tracepoints.
func (s *Session) attach(ctx context.Context, progress backend.Progress) error {
	functions, tracepoints := splitTargets(s.targets)
	var err error
	if len(functions) > 0 {
		s.attached, err = s.backend.Attach(ctx, s.capture, functions, progress)
	}
	if err == nil && len(tracepoints) > 0 {
		var attached *backend.Attachment
		attached, err = backend.AttachTracepoints(ctx, s.capture, tracepoints, progress)
		s.attached = s.attached.Join(attached)
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.attached.Attached == 0 {
		return fmt.Errorf("nothing could be attached: %s", strings.Join(s.attached.Skipped.Summary(1), "; "))
	}
	return nil
}

// ready readies the decoding of the calls.
func (s *Session) ready(cat *kernel.Catalogue, cfg Config) {
	sym := cat.Symbolizer()
	// A catalogue of some functions reads every symbol at the first
	// address decoded: start now, before the first calls come.
	go sym.Prepare()
	s.decoder = event.NewDecoder(s.plans, decode.Options(cfg.Decode), sym)
	s.decoder.Show(s.show.blocks)
	if cfg.Stack {
		s.stacks = &stackFrames{m: s.capture.Collection.Maps[bpf.CaptureMapStacks], sym: sym, cache: map[uint32][]string{},
			trampoline: s.backend.Family == plan.Trampoline, started: map[startKey][]string{}}
	}
	if cfg.UserStack {
		s.ustacks = &userStacks{m: s.capture.Collection.Maps[bpf.CaptureMapUstacks], sym: ustack.New(), cache: map[userKey][]string{}}
		if err := s.ustacks.sym.Watch(); err != nil {
			cfg.Notify(fmt.Sprintf("--stack: %v: the user stacks of processes that exit before their calls are read show addresses", err))
		} else if cfg.Aggregate {
			s.followMappings()
		}
	}
}

// arm lets the capture program trace calls.
func (s *Session) arm() error {
	if err := s.setArmed(bpf.CaptureArmStateARM_ON); err != nil {
		return fmt.Errorf("arm the capture program: %w", err)
	}
	return nil
}

// setArmed sets the state of the trace the capture program reads (armed
// in internal/bpf/capture.c).
func (s *Session) setArmed(state bpf.CaptureArmState) error {
	return s.capture.Collection.Variables[bpf.CaptureVarArmed].Set(state)
}

// takeContents takes the contents out of the specs of maps that are not
// data sections (.rodata, .data, .bss, which are frozen or referenced
// when loaded), for fillMap to store in one batch: cilium/ebpf stores
// them one syscall per entry, which took seconds for the kprobe
// backends' address table of every function under emulation.
func takeContents(spec *ebpf.CollectionSpec) map[string][]ebpf.MapKV {
	taken := map[string][]ebpf.MapKV{}
	for name, m := range spec.Maps {
		if len(m.Contents) > 0 && !strings.HasPrefix(name, ".") {
			taken[name], m.Contents = m.Contents, nil
		}
	}
	return taken
}

// fillMap stores kvs in m with one batch update (5.6). The keys and the
// values are each of one type, which cilium/ebpf marshals.
func fillMap(m *ebpf.Map, kvs []ebpf.MapKV) error {
	keys := reflect.MakeSlice(reflect.SliceOf(reflect.TypeOf(kvs[0].Key)), len(kvs), len(kvs))
	values := reflect.MakeSlice(reflect.SliceOf(reflect.TypeOf(kvs[0].Value)), len(kvs), len(kvs))
	for i, kv := range kvs {
		keys.Index(i).Set(reflect.ValueOf(kv.Key))
		values.Index(i).Set(reflect.ValueOf(kv.Value))
	}
	_, err := m.BatchUpdate(keys.Interface(), values.Interface(), nil)
	return err
}

// configure sets the program's constants and map sizes.
func configure(spec *ebpf.CollectionSpec, cfg Config, n int) error {
	spec.Maps[bpf.CaptureMapPlans].MaxEntries = uint32(n)
	spec.Maps[bpf.CaptureMapEvents].MaxEntries = uint32(cfg.RingBufferSize)
	if cfg.Aggregate {
		// Nothing is sent: the smallest ring buffer will do.
		spec.Maps[bpf.CaptureMapEvents].MaxEntries = uint32(os.Getpagesize())
	}
	if err := sizeAggregation(spec, cfg, n); err != nil {
		return fmt.Errorf("set up the statistics: %w", err)
	}
	var comm [MaxCommLen + 1]byte
	copy(comm[:], cfg.Comm) // Validate checked it fits
	set := map[string]any{
		bpf.CaptureVarFilterPids: uint32(min(len(cfg.PIDs), 1)),
		bpf.CaptureVarFilterComm: comm,
		bpf.CaptureVarEntryGate:  uint32(min(len(cfg.Entries), 1)),
	}
	for name, v := range set {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// followPIDs traces the processes and, through the fork program, their
// children. In a PID namespace other than the initial one, the program
// finds the processes by their pids in it (configurePIDNamespace).
func (s *Session) followPIDs(pids []int) error {
	coll := s.capture.Collection
	m := coll.Maps[bpf.CaptureMapPids]
	if s.namespaced {
		m = coll.Maps[bpf.CaptureMapNspids]
	}
	for _, pid := range pids {
		if err := m.Put(uint32(pid), uint8(1)); err != nil {
			return err
		}
	}
	fork, exit := taskPrograms()
	attach := func(prog, event string) (link.Link, error) {
		if kernel.External() != nil {
			return link.AttachRawTracepoint(link.RawTracepointOptions{Name: event, Program: coll.Programs[prog]})
		}
		return link.AttachTracing(link.TracingOptions{Program: coll.Programs[prog]})
	}
	var err error
	if s.fork, err = attach(fork, "sched_process_fork"); err != nil {
		return fmt.Errorf("follow forks: %w", err)
	}
	if s.exit, err = attach(exit, "sched_process_exit"); err != nil {
		return fmt.Errorf("follow exits: %w", err)
	}
	return nil
}

// taskPrograms names the programs that follow the traced processes' forks
// and exits: BTF tracepoints, or raw ones on a kernel without BTF of its
// own (kernel.UseBTF), which tp_btf programs attach by.
func taskPrograms() (fork, exit string) {
	if kernel.External() != nil {
		return bpf.CaptureProgFollowForkRaw, bpf.CaptureProgForgetExitRaw
	}
	return bpf.CaptureProgFollowFork, bpf.CaptureProgForgetExit
}

// logVerified logs how many instructions the verifier processed for each
// program loaded, what its load time mostly goes to (Linux 5.16 reports
// it; 0 before).
func logVerified(coll *ebpf.Collection) {
	if !slog.Default().Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	for name, p := range coll.Programs {
		info, err := p.Info()
		if err != nil {
			continue
		}
		n, _ := info.VerifiedInstructions()
		slog.Debug("verified", "program", name, "instructions", n)
	}
}
