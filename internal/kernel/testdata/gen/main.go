// SPDX-License-Identifier: Apache-2.0

// Command gen writes a small kernel fixture for the catalogue tests: a BTF
// blob with only the listed functions (structs behind pointers reduced to
// their name and size), and the matching /proc/kallsyms and tracefs
// available_filter_functions(_addrs) files, taken from a real kernel.
//
// Usage (see ../regen.sh):
//
//	go run ./internal/kernel/testdata/gen -btf /sys/kernel/btf/vmlinux \
//		-kallsyms /proc/kallsyms -list amd64.list -out amd64
//
// Each line of the list names a kallsyms symbol, optionally followed by
// flags that shape the messy cases real kernels have:
//
//	notrace      in kallsyms but not in the traceable set
//	btfonly      in BTF but not in kallsyms (inlined, or freed after boot)
//	llvm         renamed NAME.llvm.<hash> as clang's ThinLTO does (synthetic)
//	dup          given a second, synthetic address (a static function of
//	             the same name in another file)
//	module=NAME  a synthetic function of module NAME, without BTF
//
// Without -kallsyms (when only a kernel's BTF is at hand) every symbol gets
// a synthetic address.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"
)

type entry struct {
	name  string
	flags map[string]string
}

type sym struct {
	addr   uint64
	kind   string
	name   string
	module string
}

func main() {
	btfPath := flag.String("btf", "/sys/kernel/btf/vmlinux", "source vmlinux BTF")
	ksymsPath := flag.String("kallsyms", "/proc/kallsyms", "source kallsyms; \"\" gives synthetic addresses")
	listPath := flag.String("list", "", "list of symbols and flags")
	out := flag.String("out", "", "output directory")
	flag.Parse()
	if *listPath == "" || *out == "" {
		log.Fatal("need -list and -out")
	}
	entries, err := readList(*listPath)
	if err != nil {
		log.Fatal(err)
	}
	spec, err := btf.LoadSpec(*btfPath)
	if err != nil {
		log.Fatal(err)
	}
	ksyms := map[string][]sym{}
	if *ksymsPath != "" {
		if ksyms, err = readKallsyms(*ksymsPath); err != nil {
			log.Fatal(err)
		}
	}

	b, err := btf.NewBuilder(nil, &btf.BuilderOptions{Deduplicate: true})
	if err != nil {
		log.Fatal(err)
	}
	var kall []sym
	traced := map[string]bool{}
	for i, e := range entries {
		_, isModule := e.flags["module"]
		if !isModule && !strings.Contains(e.name, ".") {
			var fn *btf.Func
			if err := spec.TypeByName(e.name, &fn); err != nil {
				log.Fatalf("%s: %v", e.name, err)
			}
			fn = btf.Copy(fn).(*btf.Func)
			trim(fn.Type)
			if _, err := b.Add(fn); err != nil {
				log.Fatalf("%s: %v", e.name, err)
			}
		}
		if _, ok := e.flags["btfonly"]; ok {
			continue
		}
		var found []sym
		if isModule {
			found = []sym{{addr: 0xffffffffc0000000 + uint64(i)*0x100, kind: "t", name: e.name, module: e.flags["module"]}}
		} else if *ksymsPath == "" {
			found = []sym{{addr: 0xffff800080010000 + uint64(i)*0x100, kind: "t", name: e.name}}
		} else {
			found = ksyms[e.name]
		}
		if len(found) == 0 {
			log.Fatalf("%s: not in kallsyms", e.name)
		}
		if _, ok := e.flags["dup"]; ok {
			extra := found[0]
			extra.addr += 0x800000
			found = append(found, extra)
		}
		for _, s := range found {
			if _, ok := e.flags["llvm"]; ok {
				s.name += ".llvm.4077523316537185513"
			}
			kall = append(kall, s)
			if _, ok := e.flags["notrace"]; !ok {
				traced[fmt.Sprint(s.addr, s.name)] = true
			}
		}
	}
	slices.SortFunc(kall, func(x, y sym) int {
		if x.addr < y.addr {
			return -1
		}
		if x.addr > y.addr {
			return 1
		}
		return 0
	})

	blob, err := b.Marshal(nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	var ks, names, addrs strings.Builder
	for _, s := range kall {
		mod := ""
		if s.module != "" {
			mod = "\t[" + s.module + "]"
		}
		fmt.Fprintf(&ks, "%016x %s %s%s\n", s.addr, s.kind, s.name, mod)
		if traced[fmt.Sprint(s.addr, s.name)] {
			fmt.Fprintf(&names, "%s%s\n", s.name, mod)
			fmt.Fprintf(&addrs, "%x %s%s\n", s.addr, s.name, mod)
		}
	}
	write(*out, "sys/kernel/btf/vmlinux", string(blob))
	write(*out, "proc/kallsyms", ks.String())
	write(*out, "sys/kernel/tracing/available_filter_functions", names.String())
	write(*out, "sys/kernel/tracing/available_filter_functions_addrs", addrs.String())
}

// trim drops the members of structs and unions reached through pointers,
// keeping those passed or returned by value, so the blob stays small.
func trim(proto btf.Type) {
	kept := map[btf.Type]bool{}
	markKept(proto, kept)
	seen := map[btf.Type]bool{}
	var walk func(t btf.Type)
	walk = func(t btf.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch v := t.(type) {
		case *btf.Struct:
			if !kept[v] {
				v.Members = nil
			}
			for _, m := range v.Members {
				walk(m.Type)
			}
		case *btf.Union:
			if !kept[v] {
				v.Members = nil
			}
			for _, m := range v.Members {
				walk(m.Type)
			}
		default:
			for child := range children(t) {
				walk(child)
			}
		}
	}
	walk(proto)
}

// markKept marks the structs and unions reached by value from t.
func markKept(t btf.Type, kept map[btf.Type]bool) {
	switch v := t.(type) {
	case *btf.FuncProto:
		markKept(v.Return, kept)
		for _, p := range v.Params {
			markKept(p.Type, kept)
		}
	case *btf.Struct:
		if kept[v] {
			return
		}
		kept[v] = true
		for _, m := range v.Members {
			markKept(m.Type, kept)
		}
	case *btf.Union:
		if kept[v] {
			return
		}
		kept[v] = true
		for _, m := range v.Members {
			markKept(m.Type, kept)
		}
	case *btf.Typedef:
		markKept(v.Type, kept)
	case *btf.Const:
		markKept(v.Type, kept)
	case *btf.Volatile:
		markKept(v.Type, kept)
	case *btf.Array:
		markKept(v.Type, kept)
	}
}

// children yields the types t refers to directly.
func children(t btf.Type) func(func(btf.Type) bool) {
	return func(yield func(btf.Type) bool) {
		switch v := t.(type) {
		case *btf.Pointer:
			yield(v.Target)
		case *btf.Typedef:
			yield(v.Type)
		case *btf.Const:
			yield(v.Type)
		case *btf.Volatile:
			yield(v.Type)
		case *btf.Restrict:
			yield(v.Type)
		case *btf.TypeTag:
			yield(v.Type)
		case *btf.Array:
			if yield(v.Type) {
				yield(v.Index)
			}
		case *btf.FuncProto:
			if !yield(v.Return) {
				return
			}
			for _, p := range v.Params {
				if !yield(p.Type) {
					return
				}
			}
		}
	}
}

func readList(path string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		e := entry{name: fields[0], flags: map[string]string{}}
		for _, fl := range fields[1:] {
			k, v, _ := strings.Cut(fl, "=")
			e.flags[k] = v
		}
		entries = append(entries, e)
	}
	return entries, sc.Err()
}

func readKallsyms(path string) (map[string][]sym, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string][]sym{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s sym
		if _, err := fmt.Sscanf(sc.Text(), "%x %s %s", &s.addr, &s.kind, &s.name); err != nil {
			return nil, fmt.Errorf("kallsyms %q: %w", sc.Text(), err)
		}
		if !strings.Contains(sc.Text(), "[") && strings.ContainsAny(s.kind, "tT") {
			m[s.name] = append(m[s.name], s)
		}
	}
	return m, sc.Err()
}

func write(dir, name, content string) {
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		log.Fatal(err)
	}
}
