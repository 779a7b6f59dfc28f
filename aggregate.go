// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/bpf"
)

// maxErrnos bounds the (function, errno) pairs an aggregating session
// counts; errors beyond are counted in CNT_MISS_ERRNO.
const maxErrnos = 16384

// defaultStackCounts is how many distinct stacks an aggregating session
// with stacks counts calls under by default (Config.StackCounts): four
// times the stacks each stack map holds, as the pairs of a kernel and a
// user stack outnumber either.
const defaultStackCounts = 4 * int(bpf.CaptureLimitMAX_STACKS)

// sizeAggregation sizes the maps of the in-kernel statistics: one entry
// each unless cfg aggregates.
func sizeAggregation(spec *ebpf.CollectionSpec, cfg Config, n int) error {
	if !cfg.Aggregate {
		return nil
	}
	spec.Maps[bpf.CaptureMapCallCounts].MaxEntries = uint32(n)
	spec.Maps[bpf.CaptureMapStats].MaxEntries = uint32(n)
	spec.Maps[bpf.CaptureMapErrnos].MaxEntries = maxErrnos
	if cfg.Stack || cfg.UserStack {
		spec.Maps[bpf.CaptureMapStackCounts].MaxEntries = uint32(cmp.Or(cfg.StackCounts, defaultStackCounts))
	}
	return spec.Variables[bpf.CaptureVarAggregate].Set(uint32(1))
}

// counted sums the calls the kernel counted over the functions.
func (s *Session) counted() (uint64, error) {
	var sum uint64
	err := s.eachCounted(func(_ uint32, calls uint64) { sum += calls })
	return sum, err
}

// eachCounted calls each for every function the kernel counted calls of,
// with its id and its number of calls, read from their own map, 8 bytes
// a function, mapped: a function that was not called costs neither the
// time nor the memory of its figures.
func (s *Session) eachCounted(each func(id uint32, calls uint64)) error {
	counts, err := s.capture.Collection.Maps[bpf.CaptureMapCallCounts].Memory()
	if err != nil {
		return fmt.Errorf("map the statistics: %w", err)
	}
	word := make([]byte, 8)
	for id := range s.plans {
		// An array's elements are value-sized (a multiple of 8) and in
		// order; the kernel's atomic adds make each word consistent.
		if _, err := counts.ReadAt(word, int64(id)*8); err != nil {
			return fmt.Errorf("read the statistics: %w", err)
		}
		if calls := binary.NativeEndian.Uint64(word); calls > 0 {
			each(uint32(id), calls)
		}
	}
	return nil
}

// figuresBatch is how many functions' figures (2 KiB each) one system
// call reads.
const figuresBatch = 64

// eachFigures calls each with the figures of every function called, made
// by the kernel at its first call; st is valid during the call only.
func (s *Session) eachFigures(each func(id uint32, st *bpf.CaptureFuncStats)) error {
	return eachEntry(s.capture.Collection.Maps[bpf.CaptureMapStats], figuresBatch, func(id uint32, st *bpf.CaptureFuncStats) {
		if int(id) < len(s.plans) {
			each(id, st)
		}
	})
}

// FunctionStats returns the figures the kernel counted for each function
// called since the session was armed. After Close it returns those read
// once everything was detached.
func (s *Session) FunctionStats() ([]call.FunctionStats, error) {
	if !s.aggregate {
		return nil, ErrNotAggregating
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return s.finalStats, nil
	}
	return s.functionStats()
}

// functionStats reads FunctionStats from the maps, with mu held, in the
// order of the functions' ids. A function called without figures
// (Stats.MissFigures) has its calls alone.
func (s *Session) functionStats() ([]call.FunctionStats, error) {
	var fs []call.FunctionStats
	index := map[uint32]int{}
	err := s.eachCounted(func(id uint32, calls uint64) {
		p := s.plans[id]
		index[id] = len(fs)
		fs = append(fs, call.FunctionStats{Func: p.Func.Name, Module: p.Func.Module, Calls: calls, Event: p.Func.IsTracepoint()})
	})
	if err != nil {
		return nil, err
	}
	err = s.eachFigures(func(id uint32, st *bpf.CaptureFuncStats) {
		i, ok := index[id]
		if !ok || fs[i].Event {
			return
		}
		fs[i].Errors, fs[i].Total = st.Errors, st.TotalNs
		fs[i].Latency = call.NewHistogram(slices.Clone(st.Hist[:]), st.MaxNs)
	})
	if err != nil {
		return nil, fmt.Errorf("read the figures: %w", err)
	}
	err = eachEntry(s.capture.Collection.Maps[bpf.CaptureMapErrnos], 4096, func(k bpf.CaptureErrnoKey, n *uint64) {
		if i, ok := index[k.Func]; ok {
			if fs[i].Errnos == nil {
				fs[i].Errnos = map[int]uint64{}
			}
			fs[i].Errnos[int(k.Err)] = *n
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read the errors by errno: %w", err)
	}
	return fs, nil
}

// StackCounts returns the calls the kernel counted since the session was
// armed by function and stacks (Config.Stack, Config.UserStack): each
// function's calls under each pair of stacks they ended under, or without
// stacks under none, one StackCount a function. The stacks are named once
// read, the user stacks by their process's mappings as they were last
// known. After Close it returns those read once everything was detached.
func (s *Session) StackCounts() ([]StackCount, error) {
	if !s.aggregate {
		return nil, ErrNotAggregating
	}
	// The symbolisers serve StackCounts alone in an aggregating session,
	// which reads no calls: Close has them under mu's lock.
	s.stackMu.Lock()
	defer s.stackMu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return s.finalStackCounts, nil
	}
	return s.stackCounts(nil)
}

// byFunction returns the counts of a session without stacks: each
// function's calls, under no stack.
func byFunction(fs []call.FunctionStats) []StackCount {
	var counts []StackCount
	for _, f := range fs {
		counts = append(counts, StackCount{Func: f.Func, Module: f.Module, Calls: f.Calls})
	}
	return counts
}

// stackCounts reads StackCounts from the maps, with mu held. Without
// stacks they are the functions' calls: those of fs if the caller has
// just read them, else read here.
func (s *Session) stackCounts(fs []call.FunctionStats) ([]StackCount, error) {
	if s.stacks == nil && s.ustacks == nil {
		var err error
		if fs == nil {
			fs, err = s.functionStats()
		}
		return byFunction(fs), err
	}
	var counts []StackCount
	err := eachEntry(s.capture.Collection.Maps[bpf.CaptureMapStackCounts], 4096, func(k bpf.CaptureStackCountKey, n *uint64) {
		if int(k.Func) >= len(s.plans) {
			return
		}
		fn := s.plans[k.Func].Func
		c := StackCount{Func: fn.Name, Module: fn.Module, PID: k.Pid, Calls: *n}
		switch {
		case k.Stack == uint32(bpf.CaptureStackMarkSTACK_LOST):
			c.Stack = []string{call.LostStack}
		case k.Stack != 0 && s.stacks != nil:
			c.Stack = s.stacks.startAt(k.Stack-1, fn)
		}
		switch {
		case k.Ustack == uint32(bpf.CaptureStackMarkSTACK_LOST):
			c.UStack = []string{call.LostStack}
		case k.Ustack != 0 && s.ustacks != nil:
			c.UStack = s.ustacks.named(k.Pid, "", k.Ustack-1)
		}
		counts = append(counts, c)
	})
	if err != nil {
		return nil, fmt.Errorf("read the counts by stack: %w", err)
	}
	// The calls the map had no room for, counted with their function.
	err = s.eachFigures(func(id uint32, st *bpf.CaptureFuncStats) {
		if st.Unstacked > 0 {
			fn := s.plans[id].Func
			counts = append(counts, StackCount{Func: fn.Name, Module: fn.Module, Stack: []string{call.UncountedStack}, Calls: st.Unstacked})
		}
	})
	return counts, err
}

// eachEntry calls each for every entry of a hash map with keys K and
// values V, read batch entries at a time where the kernel can (5.6+): a
// scrape of a trace of every function made two system calls per entry
// otherwise, each of them traced, and took 20 s in the amd64-7.3 guest.
// The value is valid during the call only.
func eachEntry[K, V any](m *ebpf.Map, batch int, each func(K, *V)) error {
	keys := make([]K, min(int(m.MaxEntries()), batch))
	values := make([]V, len(keys))
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, values, nil)
		for i := range n {
			each(keys[i], &values[i])
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported) && n == 0:
			var k K
			var v V
			it := m.Iterate()
			for it.Next(&k, &v) {
				each(k, &v)
			}
			return it.Err()
		case err != nil:
			return err
		}
	}
}
