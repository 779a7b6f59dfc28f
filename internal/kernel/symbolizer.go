// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// maxSymbolGap bounds how far past a symbol an address still belongs to
// it; kallsyms has no sizes.
const maxSymbolGap = 1 << 20

// Symbolizer maps kernel addresses to "symbol+offset" through kallsyms:
// text and data symbols of vmlinux and modules. Heap, stack and user
// addresses fall outside every symbol and are not symbolised.
type Symbolizer struct {
	addrs []uint64
	names []string
	// mods holds the module of each symbol, an index into modNames: 0 for
	// vmlinux.
	mods     []uint16
	modNames []string
}

// minKernelAddr is below every kernel text or data address on x86-64 and
// arm64 (both put the kernel in the top half of the address space).
const minKernelAddr = 1 << 63

// LiveSymbolizer reads /proc/kallsyms.
func LiveSymbolizer() (*Symbolizer, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return NewSymbolizer(f)
}

// NewSymbolizer reads symbols formatted like /proc/kallsyms.
func NewSymbolizer(r io.Reader) (*Symbolizer, error) {
	type sym struct {
		addr uint64
		name string
		mod  uint16
	}
	modIndex := map[string]uint16{"": 0}
	modNames := []string{""}
	var syms []sym
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		addr, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms: bad address %q: %w", fields[0], err)
		}
		// Absolute symbols and per-CPU offsets (small addresses) would
		// "symbolise" heap pointers as far offsets.
		if addr < minKernelAddr || fields[1] == "A" || fields[1] == "a" ||
			strings.HasPrefix(fields[2], "__pfx_") || strings.HasPrefix(fields[2], "__cfi_") {
			continue
		}
		mod := ""
		if len(fields) > 3 {
			mod = strings.Trim(fields[3], "[]")
		}
		i, ok := modIndex[mod]
		if !ok && len(modNames) < 1<<16 {
			i = uint16(len(modNames))
			modIndex[mod] = i
			modNames = append(modNames, mod)
		}
		syms = append(syms, sym{addr, fields[2], i})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	s := &Symbolizer{addrs: make([]uint64, len(syms)), names: make([]string, len(syms)), mods: make([]uint16, len(syms)), modNames: modNames}
	for i, sy := range syms {
		s.addrs[i], s.names[i], s.mods[i] = sy.addr, sy.name, sy.mod
	}
	return s, nil
}

// Symbolize returns the symbol holding addr and the offset into it.
func (s *Symbolizer) Symbolize(addr uint64) (string, uint64, bool) {
	i, ok := s.find(addr)
	if !ok {
		return "", 0, false
	}
	return s.names[i], addr - s.addrs[i], true
}

// SymbolizeModule is Symbolize, with the module of the symbol: "" for
// vmlinux, "bpf" for BPF programs and trampolines.
func (s *Symbolizer) SymbolizeModule(addr uint64) (name string, off uint64, module string, ok bool) {
	i, ok := s.find(addr)
	if !ok {
		return "", 0, "", false
	}
	return s.names[i], addr - s.addrs[i], s.modNames[s.mods[i]], true
}

// find returns the index of the symbol holding addr.
func (s *Symbolizer) find(addr uint64) (int, bool) {
	i := sort.Search(len(s.addrs), func(i int) bool { return s.addrs[i] > addr }) - 1
	if i < 0 || addr-s.addrs[i] > maxSymbolGap {
		return 0, false
	}
	return i, true
}
