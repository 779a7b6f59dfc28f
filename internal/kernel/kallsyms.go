// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"fmt"
	"iter"
	"strconv"
	"strings"
)

// Symbol is one text symbol of the running kernel, as listed by
// /proc/kallsyms or by tracefs.
type Symbol struct {
	Name   string // symbol name, compiler suffix included
	Module string // module name, "" for vmlinux
	Addr   uint64 // 0 when the kernel hides addresses
}

// parseKallsyms reads data, formatted like /proc/kallsyms:
// "ffffffff81000000 T name [module]". It returns the text symbols, and a
// Symbolizer of the text and data symbols, in one pass: reading
// /proc/kallsyms is a good part of trawl's start-up under emulation.
// Padding symbols (__pfx_, __cfi_) that precede functions are skipped.
// With keep, it returns only the text symbols whose names keep accepts,
// and no Symbolizer.
func parseKallsyms(data []byte, keep *nameSet) ([]Symbol, *Symbolizer, error) {
	var text []Symbol
	var all symbolizerBuilder
	for n, line := range lines(data) {
		addrField, rest := nextField(line)
		typ, rest := nextField(rest)
		name, rest := nextField(rest)
		if name == "" {
			return nil, nil, fmt.Errorf("kallsyms line %d: want \"ADDRESS TYPE NAME\", got %q", n, line)
		}
		if !keep.has(name) {
			continue
		}
		if strings.HasPrefix(name, "__pfx_") || strings.HasPrefix(name, "__cfi_") {
			continue
		}
		addr, err := strconv.ParseUint(addrField, 16, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("kallsyms line %d: bad address %q: %w", n, addrField, err)
		}
		module := moduleField(rest)
		if keep == nil {
			all.add(addr, typ, name, module)
		}
		switch typ {
		case "t", "T", "w", "W":
			text = append(text, Symbol{Name: name, Module: module, Addr: addr})
		}
	}
	if keep != nil {
		return text, nil, nil
	}
	return text, all.build(), nil
}

// parseFilterFunctions reads tracefs's available_filter_functions ("name
// [module]" per line) or, when withAddrs is set,
// available_filter_functions_addrs ("address name [module]").
// Entries the kernel marks invalid (__ftrace_invalid_address___N, left by
// weak functions that were overridden) are skipped, and with keep, those
// whose names keep refuses.
func parseFilterFunctions(data []byte, withAddrs bool, keep *nameSet) ([]Symbol, error) {
	var syms []Symbol
	for n, line := range lines(data) {
		var sym Symbol
		first, rest := nextField(line)
		if first == "" {
			continue
		}
		if withAddrs {
			name, _ := nextField(rest)
			if !keep.has(name) {
				continue
			}
			addr, err := strconv.ParseUint(first, 16, 64)
			if err != nil {
				return nil, fmt.Errorf("available_filter_functions_addrs line %d: bad address %q: %w", n, first, err)
			}
			sym.Addr = addr
			if first, rest = nextField(rest); first == "" {
				return nil, fmt.Errorf("available_filter_functions_addrs line %d: want \"ADDRESS NAME\", got %q", n, line)
			}
		}
		if !keep.has(first) {
			continue
		}
		sym.Name = first
		sym.Module = moduleField(rest)
		if strings.HasPrefix(sym.Name, "__ftrace_invalid_address__") {
			continue
		}
		syms = append(syms, sym)
	}
	return syms, nil
}

// lines yields the lines of data with their numbers, from 1. The names
// parsed from them share one copy of data (these files list every kernel
// symbol: one string per name was most of their parsing time).
func lines(data []byte) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		s := string(data)
		for n := 1; s != ""; n++ {
			var line string
			line, s, _ = strings.Cut(s, "\n")
			if !yield(n, line) {
				return
			}
		}
	}
}

// nextField returns the first space- or tab-separated field of s and
// what follows it.
func nextField(s string) (field, rest string) {
	start := 0
	for start < len(s) && (s[start] == ' ' || s[start] == '\t') {
		start++
	}
	for end := start; end < len(s); end++ {
		if s[end] == ' ' || s[end] == '\t' {
			return s[start:end], s[end:]
		}
	}
	return s[start:], ""
}

// moduleField returns the module name from the trailing "[module]" field
// of a kallsyms or tracefs line, or "" for vmlinux.
func moduleField(rest string) string {
	field, _ := nextField(rest)
	return strings.TrimSuffix(strings.TrimPrefix(field, "["), "]")
}
