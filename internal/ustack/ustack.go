// SPDX-License-Identifier: Apache-2.0

// Package ustack names the frames of user stacks: the return addresses a
// task's frame pointers led to, in the memory of its process. A process's
// mappings are read from /proc/PID/maps when it is first seen and again
// after it execs, and kept after it exits, so that its later calls still
// symbolise; with Watch, the kernel's events of new mappings and execs
// keep them too, for a process that exits before its first call is
// read. The code of a mapping is named by the ELF file's .symtab or
// .dynsym, by Go's .gopclntab (which stripped Go binaries keep), by
// /tmp/perf-PID.map for code a JIT made, else as "module+0xoffset".
package ustack

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Bounds of what a Symbolizer keeps: past them, it forgets the least
// recently used.
const (
	maxProcs    = 4096
	maxBinaries = 64
)

// rereadAfter is how long a process's mappings are trusted for an address
// they do not hold: after it, the maps are read again (a library loaded
// since).
const rereadAfter = time.Second

// Symbolizer names user frames by process. It is not safe for concurrent
// use.
type Symbolizer struct {
	// Proc is where the processes' files are: "/proc" by default.
	Proc string
	// Tmp is where JIT runtimes write perf-PID.map: "/tmp" by default.
	Tmp   string
	procs map[uint32]*process
	bins  *binaries
	tick  uint64
	// Short counts the stacks whose frame chain ended before a
	// program's first function (see Frames).
	Short uint64
	// watch follows mappings as the kernel makes them (Watch).
	watch *watcher
}

// process is what is known of one process: its executable mappings,
// read when its name was comm.
type process struct {
	maps   []mapping
	comm   string
	readAt time.Time
	used   uint64
	// jit holds the symbols of perf-PID.map, read at the first address
	// outside every file mapping.
	jit     *symtab
	jitRead bool
}

// mapping is one executable mapping of a file: [start, end) holds the
// file's bytes from off.
type mapping struct {
	start, end, off uint64
	path            string
}

// New returns a Symbolizer reading /proc and /tmp.
func New() *Symbolizer {
	return &Symbolizer{Proc: "/proc", Tmp: "/tmp", procs: map[uint32]*process{}, bins: newBinaries(maxBinaries)}
}

// Seen notes a record of process pid whose task is named comm: the first
// record of a process, or the first after its name changed (an exec),
// reads its mappings while it may still run.
func (s *Symbolizer) Seen(pid uint32, comm string) {
	if pid == 0 {
		return
	}
	s.catchUp()
	if p := s.procs[pid]; p == nil || p.comm != comm {
		s.read(pid, comm)
	}
}

// read reads the mappings of process pid, keeping those known if it is
// gone.
func (s *Symbolizer) read(pid uint32, comm string) *process {
	p := s.procs[pid]
	if p == nil {
		if len(s.procs) >= maxProcs {
			s.forgetProcess()
		}
		p = &process{}
		s.procs[pid] = p
	}
	p.comm, p.readAt = comm, time.Now()
	if m, err := os.ReadFile(filepath.Join(s.Proc, strconv.FormatUint(uint64(pid), 10), "maps")); err == nil {
		p.maps = parseMaps(m)
		p.jit, p.jitRead = nil, false
	}
	return p
}

// forgetProcess forgets the least recently used process.
func (s *Symbolizer) forgetProcess() {
	var oldest uint32
	for pid, p := range s.procs {
		if o := s.procs[oldest]; o == nil || p.used < o.used {
			oldest = pid
		}
	}
	delete(s.procs, oldest)
}

// parseMaps returns the executable file and anonymous mappings of a
// /proc/PID/maps file.
func parseMaps(b []byte) []mapping {
	var maps []mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// 55d0c8a2e000-55d0c8a33000 r-xp 00002000 08:01 1234   /usr/bin/cat
		f := strings.Fields(sc.Text())
		if len(f) < 5 || len(f[1]) < 3 || f[1][2] != 'x' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		var path string
		if len(f) >= 6 {
			path = strings.Join(f[5:], " ")
		}
		maps = append(maps, mapping{start: start, end: end, off: off, path: path})
	}
	return maps
}

// find returns the mapping holding ip, the latest made if several do.
func (p *process) find(ip uint64) (mapping, bool) {
	for i := len(p.maps) - 1; i >= 0; i-- {
		if m := p.maps[i]; ip >= m.start && ip < m.end {
			return m, true
		}
	}
	return mapping{}, false
}

// roots are the functions a program's frame chains end in: where its
// threads start.
var roots = map[string]bool{
	"_start": true, "__libc_start_main": true, "__libc_start_call_main": true,
	"start_thread": true, "clone": true, "clone3": true, "__clone": true, "thread_start": true,
	"runtime.goexit": true, "runtime.rt0_go": true, "runtime.mstart": true, "runtime.goexit.abi0": true,
	"runtime.rt0_go.abi0": true, "runtime.mstart.abi0": true,
}

// Frames names the frames of a user stack of process pid, innermost
// first: "symbol+0xoffset [module]", "module+0xoffset" where no symbol
// fits, or "0xaddress" outside every mapping known. The stack taken
// from maxFrames frames or fewer ends at the first frame whose frame
// pointer did not lead on: code built without frame pointers cuts it
// short, which Short counts when its last frame is not where a thread
// starts.
func (s *Symbolizer) Frames(pid uint32, ips []uint64, maxFrames int) []string {
	s.catchUp()
	p := s.procs[pid]
	if p == nil {
		p = s.read(pid, "")
	}
	s.tick++
	p.used = s.tick
	frames := make([]string, 0, len(ips))
	var last string
	for i, ip := range ips {
		// A return address is past its call: look up the call's byte.
		at := ip
		if i > 0 && at > 0 {
			at--
		}
		m, ok := p.find(at)
		if !ok && time.Since(p.readAt) > rereadAfter {
			p = s.read(pid, p.comm)
			m, ok = p.find(at)
		}
		name, off, mod := s.symbol(pid, p, m, ok, at)
		last = name
		frames = append(frames, frame(name, off+(ip-at), mod, ip))
	}
	if len(ips) < maxFrames && len(ips) > 0 && !roots[last] {
		s.Short++
	}
	return frames
}

// symbol returns the name of the function at ip in p (in mapping m if
// ok), its offset, and its module; name "" when none fits (off is then
// the offset in the module, or ip when mod is "").
func (s *Symbolizer) symbol(pid uint32, p *process, m mapping, ok bool, ip uint64) (string, uint64, string) {
	if !ok || m.path == "" || strings.HasPrefix(m.path, "[") || strings.HasPrefix(m.path, "//anon") || strings.HasPrefix(m.path, "/memfd:") {
		if !p.jitRead {
			p.jit, p.jitRead = readPerfMap(filepath.Join(s.Tmp, "perf-"+strconv.FormatUint(uint64(pid), 10)+".map")), true
		}
		if name, off, found := p.jit.lookup(ip); found {
			return name, off, ""
		}
		if ok && m.path != "" {
			return "", ip - m.start, m.path
		}
		return "", ip, ""
	}
	path := strings.TrimSuffix(m.path, " (deleted)")
	mod := filepath.Base(path)
	fileOff := ip - m.start + m.off
	b := s.bins.open(filepath.Join(s.Proc, strconv.FormatUint(uint64(pid), 10), "root", path), path)
	if b != nil {
		if name, off, found := b.lookup(fileOff); found {
			return name, off, mod
		}
	}
	return "", fileOff, mod
}

// frame formats one frame.
func frame(name string, off uint64, mod string, ip uint64) string {
	switch {
	case name != "" && mod != "":
		return name + "+0x" + strconv.FormatUint(off, 16) + " [" + mod + "]"
	case name != "":
		return name + "+0x" + strconv.FormatUint(off, 16)
	case mod != "":
		return mod + "+0x" + strconv.FormatUint(off, 16)
	}
	return "0x" + strconv.FormatUint(ip, 16)
}
