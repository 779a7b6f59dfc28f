// SPDX-License-Identifier: Apache-2.0

package ustack

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// objfile is the symbols of one ELF file, looked up by file offset.
type objfile struct {
	// loads are its PT_LOAD segments, by which a file offset becomes an
	// address.
	loads []elf.ProgHeader
	syms  *symtab
	// gopcln is the Go function table, for Go binaries.
	gopcln *gosym.Table
	id     string
}

// fileKey tells files apart without reading them.
type fileKey struct {
	dev, ino    uint64
	size, mtime int64
}

// binaries caches binaries by their build ID (a Go build ID or a GNU
// one), and by file, at most max files.
type binaries struct {
	max    int
	byFile map[fileKey]*cached
	byID   map[string]*objfile
	tick   uint64
}

// cached is a file read: its binary, nil for a file that is no ELF file.
type cached struct {
	b    *objfile
	used uint64
}

func newBinaries(max int) *binaries {
	return &binaries{max: max, byFile: map[fileKey]*cached{}, byID: map[string]*objfile{}}
}

// open returns the binary at the first of paths that is a file, nil if
// none is or it is no ELF file.
func (bs *binaries) open(paths ...string) *objfile {
	for _, path := range paths {
		var st syscall.Stat_t
		if syscall.Stat(path, &st) != nil {
			continue
		}
		key := fileKey{uint64(st.Dev), st.Ino, st.Size, st.Mtim.Nano()}
		bs.tick++
		c, ok := bs.byFile[key]
		if !ok {
			if len(bs.byFile) >= bs.max {
				bs.forget()
			}
			c = &cached{b: load(path)}
			if b := c.b; b != nil && b.id != "" {
				if known, ok := bs.byID[b.id]; ok {
					c.b = known
				} else {
					bs.byID[b.id] = b
				}
			}
			bs.byFile[key] = c
		}
		c.used = bs.tick
		return c.b
	}
	return nil
}

// forget drops the least recently used file, and its binary unless
// another file has it.
func (bs *binaries) forget() {
	var oldest fileKey
	var oc *cached
	for k, c := range bs.byFile {
		if oc == nil || c.used < oc.used {
			oldest, oc = k, c
		}
	}
	delete(bs.byFile, oldest)
	if oc == nil || oc.b == nil {
		return
	}
	for _, c := range bs.byFile {
		if c.b == oc.b {
			return
		}
	}
	delete(bs.byID, oc.b.id)
}

// load reads the symbols of the ELF file at path.
func load(path string) *objfile {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := &objfile{id: buildID(f)}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			b.loads = append(b.loads, p.ProgHeader)
		}
	}
	if s := f.Section(".gopclntab"); s != nil {
		if data, err := s.Data(); err == nil {
			var text uint64
			if t := f.Section(".text"); t != nil {
				text = t.Addr
			}
			if tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text)); err == nil {
				b.gopcln = tab
			}
		}
	}
	var syms []elf.Symbol
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		if s, err := read(); err == nil {
			syms = append(syms, s...)
		}
	}
	b.syms = newSymtab(syms)
	return b
}

// buildID returns the file's Go build ID, else its GNU build ID, else "".
func buildID(f *elf.File) string {
	if s := f.Section(".note.go.buildid"); s != nil {
		if d, err := s.Data(); err == nil && len(d) > 16 {
			return "go:" + strings.TrimRight(string(d[16:]), "\x00")
		}
	}
	if s := f.Section(".note.gnu.build-id"); s != nil {
		if d, err := s.Data(); err == nil && len(d) > 16 {
			return "gnu:" + hex.EncodeToString(d[16:])
		}
	}
	return ""
}

// lookup returns the function holding file offset off and the offset in
// it.
func (b *objfile) lookup(off uint64) (string, uint64, bool) {
	addr, ok := b.address(off)
	if !ok {
		return "", 0, false
	}
	if b.gopcln != nil {
		if fn := b.gopcln.PCToFunc(addr); fn != nil {
			return fn.Name, addr - fn.Entry, true
		}
	}
	return b.syms.lookup(addr)
}

// address returns the address a file offset is loaded at.
func (b *objfile) address(off uint64) (uint64, bool) {
	for _, p := range b.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// symtab is functions by address.
type symtab struct {
	syms []sym
}

type sym struct {
	addr, size uint64
	name       string
}

// newSymtab keeps the functions of syms, sorted by address.
func newSymtab(syms []elf.Symbol) *symtab {
	t := &symtab{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Name == "" {
			continue
		}
		name, _, _ := strings.Cut(s.Name, "@") // versioned .dynsym names
		t.syms = append(t.syms, sym{s.Value, s.Size, name})
	}
	t.sort()
	return t
}

func (t *symtab) sort() {
	slices.SortStableFunc(t.syms, func(a, b sym) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
	t.syms = slices.CompactFunc(t.syms, func(a, b sym) bool { return a.addr == b.addr })
}

// lookup returns the function holding addr: the last at or below it, if
// its size covers addr (a symbol without size reaches the next).
func (t *symtab) lookup(addr uint64) (string, uint64, bool) {
	if t == nil {
		return "", 0, false
	}
	i, found := slices.BinarySearchFunc(t.syms, addr, func(s sym, a uint64) int {
		switch {
		case s.addr < a:
			return -1
		case s.addr > a:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	if i < 0 {
		return "", 0, false
	}
	s := t.syms[i]
	if s.size != 0 && addr >= s.addr+s.size {
		return "", 0, false
	}
	return s.name, addr - s.addr, true
}

// readPerfMap reads the symbols a JIT runtime wrote to a perf map file,
// lines of "START SIZE NAME" in hexadecimal; nil if there is none.
func readPerfMap(path string) *symtab {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	t := &symtab{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 3)
		if len(fields) != 3 {
			continue
		}
		start, err1 := strconv.ParseUint(strings.TrimPrefix(fields[0], "0x"), 16, 64)
		size, err2 := strconv.ParseUint(strings.TrimPrefix(fields[1], "0x"), 16, 64)
		if err1 != nil || err2 != nil || size == 0 {
			continue
		}
		t.syms = append(t.syms, sym{start, size, fields[2]})
	}
	t.sort()
	return t
}
