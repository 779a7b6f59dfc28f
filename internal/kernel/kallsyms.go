// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"bufio"
	"fmt"
	"io"
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

// parseKallsyms returns the text symbols of r, formatted like
// /proc/kallsyms: "ffffffff81000000 T name [module]". Padding symbols
// (__pfx_, __cfi_) that precede functions are skipped.
func parseKallsyms(r io.Reader) ([]Symbol, error) {
	var syms []Symbol
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			return nil, fmt.Errorf("kallsyms line %d: want \"ADDRESS TYPE NAME\", got %q", line, sc.Text())
		}
		switch fields[1] {
		case "t", "T", "w", "W":
		default:
			continue
		}
		name := fields[2]
		if strings.HasPrefix(name, "__pfx_") || strings.HasPrefix(name, "__cfi_") {
			continue
		}
		addr, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %d: bad address %q: %w", line, fields[0], err)
		}
		syms = append(syms, Symbol{Name: name, Module: moduleField(fields[3:]), Addr: addr})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	return syms, nil
}

// parseFilterFunctions reads tracefs's available_filter_functions ("name
// [module]" per line) or, when withAddrs is set,
// available_filter_functions_addrs ("address name [module]").
// Entries the kernel marks invalid (__ftrace_invalid_address___N, left by
// weak functions that were overridden) are skipped.
func parseFilterFunctions(r io.Reader, withAddrs bool) ([]Symbol, error) {
	var syms []Symbol
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		var sym Symbol
		if withAddrs {
			if len(fields) < 2 {
				return nil, fmt.Errorf("available_filter_functions_addrs line %d: want \"ADDRESS NAME\", got %q", line, sc.Text())
			}
			addr, err := strconv.ParseUint(fields[0], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("available_filter_functions_addrs line %d: bad address %q: %w", line, fields[0], err)
			}
			sym.Addr = addr
			fields = fields[1:]
		}
		sym.Name = fields[0]
		sym.Module = moduleField(fields[1:])
		if strings.HasPrefix(sym.Name, "__ftrace_invalid_address__") {
			continue
		}
		syms = append(syms, sym)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read available_filter_functions: %w", err)
	}
	return syms, nil
}

// moduleField returns the module name from the trailing "[module]" field
// of a kallsyms or tracefs line, or "" for vmlinux.
func moduleField(rest []string) string {
	if len(rest) == 0 {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(rest[0], "["), "]")
}
