// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"fmt"
	"io"
	"sort"
	"sync"
)

// maxSymbolGap bounds how far past a symbol an address still belongs to
// it; kallsyms has no sizes.
const maxSymbolGap = 1 << 20

// Symbolizer maps kernel addresses to "symbol+offset" through kallsyms:
// text and data symbols of vmlinux and modules. Heap, stack and user
// addresses fall outside every symbol and are not symbolised.
type Symbolizer struct {
	// lazy, when set, reads the symbols at first use (see lazySymbolizer).
	lazy  func()
	addrs []uint64
	names []string
	// mods holds the module of each symbol, an index into modNames: 0 for
	// vmlinux.
	mods     []uint16
	modNames []string
	// text says which symbols are code (kallsyms types t, T, w, W).
	text []bool
}

// minKernelAddr is below every kernel text or data address on x86-64 and
// arm64 (both put the kernel in the top half of the address space).
const minKernelAddr = 1 << 63

// NewSymbolizer reads symbols formatted like /proc/kallsyms.
func NewSymbolizer(r io.Reader) (*Symbolizer, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	_, s, err := parseKallsyms(data, nil)
	return s, err
}

// lazySymbolizer returns a Symbolizer of kallsyms data that parses it at
// its first use, so that a trace whose catalogue did not need every
// symbol (LoadNames) starts without parsing them. A malformed line, which
// the catalogue's own parse of data would have refused, leaves it empty.
func lazySymbolizer(data []byte) *Symbolizer {
	s := &Symbolizer{}
	s.lazy = sync.OnceFunc(func() {
		if _, full, err := parseKallsyms(data, nil); err == nil {
			s.addrs, s.names, s.mods, s.modNames, s.text = full.addrs, full.names, full.mods, full.modNames, full.text
		}
	})
	return s
}

// Prepare parses the symbols of a lazy Symbolizer now, if it has not yet;
// callers start it early in the background.
func (s *Symbolizer) Prepare() {
	if s.lazy != nil {
		s.lazy()
	}
}

// symbolizerBuilder collects the symbols of a Symbolizer.
type symbolizerBuilder struct {
	syms     []symbol
	modIndex map[string]uint16
	modNames []string
}

type symbol struct {
	addr uint64
	name string
	mod  uint16
	text bool
}

// add adds a symbol of kallsyms type typ unless it would symbolise what
// it should not: absolute symbols and per-CPU offsets (small addresses)
// would "symbolise" heap pointers as far offsets.
func (b *symbolizerBuilder) add(addr uint64, typ, name, module string) {
	if addr < minKernelAddr || typ == "A" || typ == "a" {
		return
	}
	if b.modIndex == nil {
		b.modIndex, b.modNames = map[string]uint16{"": 0}, []string{""}
	}
	i, ok := b.modIndex[module]
	if !ok && len(b.modNames) < 1<<16 {
		i = uint16(len(b.modNames))
		b.modIndex[module] = i
		b.modNames = append(b.modNames, module)
	}
	text := typ == "t" || typ == "T" || typ == "w" || typ == "W"
	b.syms = append(b.syms, symbol{addr, name, i, text})
}

func (b *symbolizerBuilder) build() *Symbolizer {
	sort.SliceStable(b.syms, func(i, j int) bool { return b.syms[i].addr < b.syms[j].addr })
	n := len(b.syms)
	s := &Symbolizer{addrs: make([]uint64, n), names: make([]string, n), mods: make([]uint16, n), modNames: b.modNames, text: make([]bool, n)}
	for i, sy := range b.syms {
		s.addrs[i], s.names[i], s.mods[i], s.text[i] = sy.addr, sy.name, sy.mod, sy.text
	}
	return s
}

// Symbolize returns the symbol holding addr and the offset into it.
func (s *Symbolizer) Symbolize(addr uint64) (string, uint64, bool) {
	i, ok := s.find(addr)
	if !ok {
		return "", 0, false
	}
	return s.names[i], addr - s.addrs[i], true
}

// SymbolizeCode symbolises a code address, as a stack frame's: the text
// symbol holding it, the offset into it and its module ("" for vmlinux,
// "bpf" for BPF programs and trampolines). An address whose nearest
// symbol is data is in no code kallsyms listed when it was read: a BPF
// program or trampoline loaded since, or a module's: ok is false.
func (s *Symbolizer) SymbolizeCode(addr uint64) (name string, off uint64, module string, ok bool) {
	i, ok := s.find(addr)
	if !ok || !s.text[i] {
		return "", 0, "", false
	}
	return s.names[i], addr - s.addrs[i], s.modNames[s.mods[i]], true
}

// find returns the index of the symbol holding addr.
func (s *Symbolizer) find(addr uint64) (int, bool) {
	s.Prepare()
	i := sort.Search(len(s.addrs), func(i int) bool { return s.addrs[i] > addr }) - 1
	if i < 0 || addr-s.addrs[i] > maxSymbolGap {
		return 0, false
	}
	return i, true
}
