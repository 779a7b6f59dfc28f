// SPDX-License-Identifier: Apache-2.0

package ustack

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"golang.org/x/sys/unix"
)

// mmapPages is the size of each CPU's buffer of mapping events, in pages
// (a power of two): about 2000 mappings at 128 bytes each.
const mmapPages = 64

// watcher reads the kernel's events of executable mappings, execs and
// forks (perf's PERF_RECORD_MMAP2, COMM and FORK, from a dummy software
// event on each CPU), as perf record does to name the code of processes
// that are gone by the time it is read.
type watcher struct {
	cpus []perfRing
	buf  []byte
	// pending holds the events of one catchUp, from every CPU.
	pending [][]byte
	// Lost counts the events the buffers had no room for.
	Lost uint64
}

// perfRing is one CPU's buffer.
type perfRing struct {
	fd   int
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
}

// Watch starts following the executable mappings, execs and forks of
// every process from now on: a process that exits before its stacks are
// read still symbolises. It needs CAP_PERFMON (or CAP_SYS_ADMIN).
func (s *Symbolizer) Watch() error {
	w := &watcher{}
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_DUMMY,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:   unix.PerfBitMmap | unix.PerfBitMmap2 | unix.PerfBitComm | unix.PerfBitCommExec | unix.PerfBitTask | unix.PerfBitSampleIDAll,
		// Each event ends with its time: the buffers are per CPU, and a
		// process that moved between CPUs has its exec on one and the
		// mappings its loader makes next on another.
		Sample_type: unix.PERF_SAMPLE_TIME,
		Wakeup:      1 << 30, // never woken: read when stacks are
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	size := (1 + mmapPages) * os.Getpagesize()
	for cpu := range cpus {
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if errors.Is(err, unix.ENODEV) {
			continue // a CPU offline
		}
		if err != nil {
			w.close()
			return fmt.Errorf("watch the mappings of processes: %w", err)
		}
		mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			w.close()
			return fmt.Errorf("map the buffer of mapping events: %w", err)
		}
		meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
		page := uint64(os.Getpagesize())
		w.cpus = append(w.cpus, perfRing{fd: fd, mem: mem, meta: meta, data: mem[page : page+mmapPages*page]})
	}
	s.watch = w
	return nil
}

// Close stops watching.
func (s *Symbolizer) Close() error {
	if s.watch != nil {
		s.watch.close()
		s.watch = nil
	}
	return nil
}

func (w *watcher) close() {
	for _, r := range w.cpus {
		unix.Munmap(r.mem)
		unix.Close(r.fd)
	}
	w.cpus = nil
}

// CatchUp applies the mapping events the kernel wrote since the last call
// (Watch), as naming a stack does: call it now and then while no stacks
// are named, before the kernel's buffers of events fill and drop some.
func (s *Symbolizer) CatchUp() { s.catchUp() }

// catchUp applies the events written since the last call, in the order
// they happened across the CPUs.
func (s *Symbolizer) catchUp() {
	if s.watch == nil {
		return
	}
	w := s.watch
	w.pending = w.pending[:0]
	for i := range w.cpus {
		r := &w.cpus[i]
		head := atomic.LoadUint64(&r.meta.Data_head)
		tail := r.meta.Data_tail
		for tail < head {
			hdr := w.read(r.data, tail, 8)
			size := uint64(binary.NativeEndian.Uint16(hdr[6:]))
			if size < 16 {
				break
			}
			rec := append([]byte(nil), w.read(r.data, tail, size)...)
			w.pending = append(w.pending, rec)
			tail += size
		}
		atomic.StoreUint64(&r.meta.Data_tail, head)
	}
	// The time is the last 8 bytes of each event (sample_id_all with
	// PERF_SAMPLE_TIME).
	at := func(rec []byte) uint64 { return binary.NativeEndian.Uint64(rec[len(rec)-8:]) }
	slices.SortStableFunc(w.pending, func(a, b []byte) int { return cmp.Compare(at(a), at(b)) })
	for _, rec := range w.pending {
		s.event(binary.NativeEndian.Uint32(rec), binary.NativeEndian.Uint16(rec[4:]), rec[8:len(rec)-8])
	}
}

// read returns size bytes of the ring data from position at, copied when
// they wrap around its end.
func (w *watcher) read(data []byte, at, size uint64) []byte {
	n := uint64(len(data))
	start := at % n
	if start+size <= n {
		return data[start : start+size]
	}
	w.buf = append(w.buf[:0], data[start:]...)
	return append(w.buf, data[:size-(n-start)]...)
}

// event applies one event: a new executable mapping, an exec, a fork.
func (s *Symbolizer) event(typ uint32, misc uint16, b []byte) {
	u32 := func(i int) uint32 { return binary.NativeEndian.Uint32(b[i:]) }
	u64 := func(i int) uint64 { return binary.NativeEndian.Uint64(b[i:]) }
	switch typ {
	case unix.PERF_RECORD_LOST:
		if len(b) >= 16 {
			s.watch.Lost += u64(8)
		}
	case unix.PERF_RECORD_COMM:
		// pid, tid, comm: an exec replaces every mapping.
		if misc&unix.PERF_RECORD_MISC_COMM_EXEC != 0 && len(b) >= 8 {
			p := s.proc(u32(0))
			p.maps, p.jit, p.jitRead = nil, nil, false
			p.comm = cString(b[8:])
		}
	case unix.PERF_RECORD_FORK:
		// pid, ppid, tid, ptid: a new process has its parent's mappings.
		if len(b) >= 16 && u32(0) == u32(8) && u32(0) != u32(4) {
			if parent := s.procs[u32(4)]; parent != nil {
				p := s.proc(u32(0))
				p.maps, p.comm = append([]mapping(nil), parent.maps...), parent.comm
			}
		}
	case unix.PERF_RECORD_MMAP2:
		// pid, tid, addr, len, pgoff, 24 bytes of file identity, prot,
		// flags, filename.
		if len(b) < 64 || u32(56)&unix.PROT_EXEC == 0 {
			return
		}
		p := s.proc(u32(0))
		addr, size := u64(8), u64(16)
		p.maps = append(p.maps, mapping{start: addr, end: addr + size, off: u64(24), path: cString(b[64:])})
	}
}

// proc returns the process pid, known from now on as read.
func (s *Symbolizer) proc(pid uint32) *process {
	p := s.procs[pid]
	if p == nil {
		if len(s.procs) >= maxProcs {
			s.forgetProcess()
		}
		p = &process{readAt: time.Now()}
		s.procs[pid] = p
	}
	return p
}

// cString returns the NUL-terminated string at the start of b.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
