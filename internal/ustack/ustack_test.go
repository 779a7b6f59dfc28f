// SPDX-License-Identifier: Apache-2.0

package ustack

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const prog = `package main

import (
	"fmt"
	"os"
	"reflect"
)

//go:noinline
func work() int { return len(os.Args) }

func main() {
	fmt.Println(reflect.ValueOf(work).Pointer())
	os.Stdin.Read(make([]byte, 1))
	os.Exit(work() - 1)
}
`

// build builds prog with the go flags given into dir.
func build(t *testing.T, dir string, flags ...string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module prog\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "prog")
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), ".")...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// TestGoBinary symbolises the address of a function of running Go
// programs, plain, stripped and position-independent, and again once
// they exited.
func TestGoBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"plain", nil},
		{"stripped", []string{"-ldflags=-s -w"}},
		{"pie", []string{"-buildmode=pie"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := build(t, t.TempDir(), tc.flags...)
			cmd := exec.Command(bin)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			addr, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			pid := uint32(cmd.Process.Pid)
			s := New()
			s.Seen(pid, "prog")
			// The first frame is an address as it is; the next are
			// return addresses, looked up a byte before.
			want := []string{"main.work+0x4 [prog]", "main.work+0x5 [prog]"}
			check := func() {
				t.Helper()
				got := s.Frames(pid, []uint64{addr + 4, addr + 5}, 64)
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("frames %q, want %q", got, want)
				}
			}
			check()
			stdin.Close()
			cmd.Wait()
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(int(pid)))); err == nil {
				t.Fatal("the program has not exited")
			}
			s.procs[pid].readAt = s.procs[pid].readAt.Add(-2 * rereadAfter)
			check()
			if s.Short != 2 {
				t.Errorf("%d short stacks, want 2 (neither ends in a thread's start)", s.Short)
			}
		})
	}
}

// TestBuildID shares one binary between copies of a file.
func TestBuildID(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "copy")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	bs := newBinaries(2)
	one := bs.open(bin)
	if one == nil || !strings.HasPrefix(one.id, "go:") {
		t.Fatalf("binary %+v, want one with a Go build ID", one)
	}
	if two := bs.open(cp); two != one {
		t.Error("a copy of the binary was read again")
	}
	if bs.open(filepath.Join(dir, "main.go")) != nil {
		t.Error("a Go source file read as an ELF file")
	}
	if len(bs.byFile) != 2 {
		t.Errorf("%d files cached, want the bound, 2", len(bs.byFile))
	}
}

// TestELFSymbols names functions by .symtab and .dynsym, in a binary
// without Go's function table.
func TestELFSymbols(t *testing.T) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Skipf("the test binary has no symbols: %v", err)
	}
	b := load("/proc/self/exe")
	b.gopcln = nil // the ELF symbols alone
	var fn elf.Symbol
	for _, s := range syms {
		if s.Name == "main.main" {
			fn = s
		}
	}
	if fn.Value == 0 {
		t.Fatal("no main.main in the test binary")
	}
	var off uint64
	for _, p := range b.loads {
		if fn.Value >= p.Vaddr && fn.Value < p.Vaddr+p.Filesz {
			off = fn.Value - p.Vaddr + p.Off
		}
	}
	if name, at, ok := b.lookup(off + 3); !ok || name != "main.main" || at != 3 {
		t.Errorf("lookup = %q+%d %v, want main.main+3", name, at, ok)
	}
	if _, _, ok := b.lookup(off + fn.Size); ok && fn.Size > 0 {
		name, _, _ := b.lookup(off + fn.Size)
		if name == "main.main" {
			t.Error("main.main reaches past its size")
		}
	}
	tab := newSymtab([]elf.Symbol{
		{Name: "read@@GLIBC_2.2.5", Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Value: 0x1000, Size: 0x20},
		{Name: "data", Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_OBJECT), Value: 0x1010, Size: 0x20},
	})
	if name, at, ok := tab.lookup(0x1008); !ok || name != "read" || at != 8 {
		t.Errorf("dynsym lookup = %q+%d %v, want read+8", name, at, ok)
	}
	if _, _, ok := tab.lookup(0x1020); ok {
		t.Error("a function found past its size")
	}
}

// TestMapsAndFallbacks reads a maps file, a perf map, and names code
// outside any symbol by its module and offset.
func TestMapsAndFallbacks(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc")
	if err := os.MkdirAll(filepath.Join(proc, "42"), 0o700); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(data, make([]byte, 0x3000), 0o600); err != nil {
		t.Fatal(err)
	}
	maps := "" +
		"00400000-00401000 r--p 00000000 08:01 11 " + data + "\n" +
		"00401000-00403000 r-xp 00001000 08:01 11 " + data + "\n" +
		"7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n" +
		"7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]\n"
	if err := os.WriteFile(filepath.Join(proc, "42", "maps"), []byte(maps), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "perf-42.map"), []byte("7f0000001000 100 LazyCompile:*fib js/fib.js:3\nbad line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := New()
	s.Proc, s.Tmp = proc, dir
	s.Seen(42, "node")
	got := s.Frames(42, []uint64{0x401010, 0x7f0000001011, 0x7f0000005000, 0x900000}, 64)
	want := []string{"data.bin+0x1010", "LazyCompile:*fib js/fib.js:3+0x11", "0x7f0000005000", "0x900000"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("frames %q, want %q", got, want)
	}
	if m := parseMaps([]byte(maps)); len(m) != 3 {
		t.Errorf("%d executable mappings, want 3", len(m))
	}
}

// TestEvents applies the kernel's events of an exec, a mapping and a
// fork, as Watch reads them, to processes gone from /proc.
func TestEvents(t *testing.T) {
	s := New()
	s.Proc = t.TempDir() // no process is there
	s.watch = &watcher{}
	le := binary.NativeEndian
	comm := le.AppendUint32(le.AppendUint32(nil, 9), 9)
	s.event(unix.PERF_RECORD_COMM, unix.PERF_RECORD_MISC_COMM_EXEC, append(comm, "prog\x00\x00\x00\x00"...))
	mmap := func(prot uint32, path string) []byte {
		b := le.AppendUint32(le.AppendUint32(nil, 9), 9)
		b = le.AppendUint64(le.AppendUint64(le.AppendUint64(b, 0x400000), 0x2000), 0x1000)
		b = append(b, make([]byte, 24)...)
		b = le.AppendUint32(le.AppendUint32(b, prot), 0)
		return append(b, path+"\x00\x00\x00"...)
	}
	s.event(unix.PERF_RECORD_MMAP2, 0, mmap(unix.PROT_READ, "/data"))
	s.event(unix.PERF_RECORD_MMAP2, 0, mmap(unix.PROT_READ|unix.PROT_EXEC, "/usr/bin/prog"))
	fork := le.AppendUint32(le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 10), 9), 10), 9)
	s.event(unix.PERF_RECORD_FORK, 0, le.AppendUint64(fork, 0))
	s.event(unix.PERF_RECORD_LOST, 0, le.AppendUint64(le.AppendUint64(nil, 1), 3))
	s.Seen(10, "prog")
	for _, pid := range []uint32{9, 10} {
		if got := s.Frames(pid, []uint64{0x400010}, 64); len(got) != 1 || got[0] != "prog+0x1010" {
			t.Errorf("pid %d: frames %q, want prog+0x1010", pid, got)
		}
	}
	if s.watch.Lost != 3 {
		t.Errorf("%d events lost, want 3", s.watch.Lost)
	}
	s.event(unix.PERF_RECORD_COMM, unix.PERF_RECORD_MISC_COMM_EXEC, append(comm, "other\x00\x00\x00"...))
	if got := s.Frames(9, []uint64{0x400010}, 64); got[0] != "0x400010" {
		t.Errorf("after an exec, frames %q, want the address alone", got)
	}
}

// TestEventsAcrossCPUs reads an exec from one CPU's buffer and the
// mapping made after it from another's, the first CPU's read first: the
// events apply in the order of their times, so the mapping stays.
func TestEventsAcrossCPUs(t *testing.T) {
	s := New()
	s.Proc = t.TempDir() // no process is there
	le := binary.NativeEndian
	record := func(typ uint32, misc uint16, body []byte, time uint64) []byte {
		body = le.AppendUint64(body, time)
		b := le.AppendUint32(nil, typ)
		b = le.AppendUint16(le.AppendUint16(b, misc), uint16(8+len(body)))
		return append(b, body...)
	}
	ids := le.AppendUint32(le.AppendUint32(nil, 9), 9)
	exec := record(unix.PERF_RECORD_COMM, unix.PERF_RECORD_MISC_COMM_EXEC, append(ids, "prog\x00\x00\x00\x00"...), 100)
	body := le.AppendUint64(le.AppendUint64(le.AppendUint64(ids, 0x400000), 0x2000), 0x1000)
	body = append(body, make([]byte, 24)...)
	body = le.AppendUint32(le.AppendUint32(body, unix.PROT_READ|unix.PROT_EXEC), 0)
	mmap := record(unix.PERF_RECORD_MMAP2, 0, append(body, "/usr/bin/prog\x00\x00\x00"...), 200)
	ring := func(rec []byte) perfRing {
		data := make([]byte, 4096)
		copy(data, rec)
		return perfRing{meta: &unix.PerfEventMmapPage{Data_head: uint64(len(rec))}, data: data}
	}
	s.watch = &watcher{cpus: []perfRing{ring(mmap), ring(exec)}}
	if got := s.Frames(9, []uint64{0x400010}, 64); len(got) != 1 || got[0] != "prog+0x1010" {
		t.Errorf("frames %q, want prog+0x1010: the exec applied after the mapping it came before", got)
	}
}
