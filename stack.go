// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/ustack"
)

// maxStack is the number of frames of a kernel stack the program takes.
const maxStack = int(bpf.CaptureLimitMAX_STACK)

// stackFrames reads the kernel stacks calls carry (--stack) from the
// program's stack map and symbolises them. A stack id keeps its stack
// for the whole session (the program never replaces a stack in the map),
// so each is read and symbolised once.
type stackFrames struct {
	m     *ebpf.Map
	sym   *kernel.Symbolizer
	cache map[uint32][]string
	ips   [maxStack]uint64
	// trampoline is set for the trampoline backends: see startAt.
	trampoline bool
	// started caches startAt's stacks by stack id and function.
	started map[startKey][]string
}

type startKey struct {
	id uint32
	fn *kernel.Function
}

// configureStacks sizes the stack map and tells the program to take
// stacks, if cfg asks for them.
func configureStacks(spec *ebpf.CollectionSpec, cfg Config) error {
	for _, st := range []struct {
		want      bool
		m, wanted string
	}{
		{cfg.Stack, bpf.CaptureMapStacks, bpf.CaptureVarWantStack},
		{cfg.UserStack, bpf.CaptureMapUstacks, bpf.CaptureVarWantUstack},
	} {
		if !st.want {
			continue
		}
		spec.Maps[st.m].MaxEntries = uint32(bpf.CaptureLimitMAX_STACKS)
		if err := spec.Variables[st.wanted].Set(uint32(1)); err != nil {
			return fmt.Errorf("set %s: %w", st.wanted, err)
		}
	}
	return nil
}

// frames returns the stack of id, innermost first, as "sym+0xoff
// [module]" ("sym+0xoff" in vmlinux), without the frames of BPF programs
// and trampolines: trawl's own program, and with the trampoline backends
// the trampoline between each traced function and its caller. It returns
// nil when the stack is gone.
func (s *stackFrames) frames(id uint32) []string {
	if f, ok := s.cache[id]; ok {
		return f
	}
	if err := s.m.Lookup(id, &s.ips); err != nil {
		return nil
	}
	var frames []string
	for _, ip := range s.ips {
		if ip == 0 {
			break
		}
		name, off, mod, ok := s.sym.SymbolizeCode(ip)
		if !ok && len(frames) == 0 {
			// The capture program and its trampoline, the innermost
			// frames, loaded after the kernel's symbols were read.
			continue
		}
		if !ok {
			frames = append(frames, "0x"+strconv.FormatUint(ip, 16))
			continue
		}
		if mod == "bpf" {
			continue
		}
		f := name + "+0x" + strconv.FormatUint(off, 16)
		if mod != "" {
			f += " [" + mod + "]"
		}
		frames = append(frames, f)
	}
	s.cache[id] = frames
	return frames
}

// startAt returns the stack of id, taken at the entry of a call of fn,
// starting at fn, innermost first, as the kprobe backends' stacks do. A
// trampoline runs before the function makes its frame, so the unwinder
// starts at its caller: for the trampoline backends, startAt puts the
// function first, at its entry ("name+0x0"), unless the stack has it. A
// tracepoint's stack starts at the function that fired it, without the
// kernel's frames that run its programs (see tracepointRunner).
func (s *stackFrames) startAt(id uint32, fn *kernel.Function) []string {
	frames := s.frames(id)
	if frames == nil || !s.trampoline && !fn.IsTracepoint() {
		return frames
	}
	key := startKey{id, fn}
	if f, ok := s.started[key]; ok {
		return f
	}
	f := frames
	switch {
	case fn.IsTracepoint():
		for len(f) > 1 && tracepointRunner(f[0]) {
			f = f[1:]
		}
	case !strings.HasPrefix(frames[0], fn.Name+"+"):
		first := fn.Name + "+0x0"
		if fn.Module != "" {
			first += " [" + fn.Module + "]"
		}
		f = append([]string{first}, frames...)
	}
	s.started[key] = f
	return f
}

// tracepointRunner says whether a frame is of the kernel's code that runs
// a tracepoint's BPF programs: __traceiter_EVENT (without static calls),
// __bpf_trace_CLASS and bpf_trace_runN.
func tracepointRunner(frame string) bool {
	for _, prefix := range []string{"__traceiter_", "__bpf_trace_", "bpf_trace_run"} {
		if strings.HasPrefix(frame, prefix) {
			return true
		}
	}
	return false
}

// followEvery is how often an aggregating session with user stacks reads
// the kernel's mapping events: often enough that its buffers, about 2000
// mappings a CPU, do not fill between two reads.
const followEvery = 500 * time.Millisecond

// followMappings reads the kernel's mapping events every followEvery
// until unfollow: in an aggregating session, which names no stack
// before StackCounts, nothing else reads them, and those of processes
// that exit meanwhile would be dropped once the buffers fill.
func (s *Session) followMappings() {
	stop, done := make(chan struct{}), make(chan struct{})
	s.unfollow = func() {
		close(stop)
		<-done
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(followEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				s.stackMu.Lock()
				s.ustacks.sym.CatchUp()
				s.stackMu.Unlock()
			}
		}
	}()
}

// maxUserStacks bounds the user stacks kept symbolised; past it, they are
// symbolised anew.
const maxUserStacks = 16384

// userStacks reads the user stacks calls carry (Config.UserStack) from
// the program's map of them, and names their frames in their process. A
// stack id keeps its addresses for the whole session, but their names
// depend on the process and the program it runs: each is symbolised once
// per process and task name (which an exec changes).
type userStacks struct {
	m     *ebpf.Map
	sym   *ustack.Symbolizer
	cache map[userKey][]string
	ips   [maxStack]uint64
	// short mirrors sym.Short for Stats, which may run meanwhile.
	short atomic.Uint64
}

type userKey struct {
	pid  uint32
	id   uint32
	comm string
}

// frames returns the user stack of id, taken in process pid while its
// task was named comm, innermost first; nil when the stack is gone.
func (u *userStacks) frames(pid uint32, comm string, id uint32) []string {
	u.sym.Seen(pid, comm)
	return u.named(pid, comm, id)
}

// named returns the user stack of id as frames does, by the mappings of
// process pid known now.
func (u *userStacks) named(pid uint32, comm string, id uint32) []string {
	key := userKey{pid, id, comm}
	if f, ok := u.cache[key]; ok {
		return f
	}
	if err := u.m.Lookup(id, &u.ips); err != nil {
		return nil
	}
	n := 0
	for n < len(u.ips) && u.ips[n] != 0 {
		n++
	}
	f := u.sym.Frames(pid, u.ips[:n], maxStack)
	u.short.Store(u.sym.Short)
	if len(u.cache) >= maxUserStacks {
		clear(u.cache)
	}
	u.cache[key] = f
	return f
}
