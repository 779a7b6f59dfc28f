// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// symKey identifies a symbol name within vmlinux ("") or a module.
type symKey struct{ module, name string }

// builder joins BTF, kallsyms and the traceable set into Functions.
type builder struct {
	objects map[string]*btfObject // module -> BTF
	ksyms   map[symKey][]uint64   // kallsyms addresses, zeros included
	used    map[string][]bool     // module -> BTF functions (by btfFuncs index) matched to a traceable symbol
	clones  map[symKey][]string   // module+base name -> clone symbols in kallsyms
	keep    *nameSet              // the names catalogued, nil for all (LoadNames)
}

func groupSymbols(syms []Symbol) map[symKey][]uint64 {
	m := make(map[symKey][]uint64, len(syms))
	for _, s := range syms {
		k := symKey{s.Module, s.Name}
		m[k] = append(m[k], s.Addr)
	}
	return m
}

// loadModules loads the split BTF of every module that has symbols. A
// module whose BTF is missing or broken keeps its functions, without
// prototypes.
func (b *builder) loadModules(fsys fs.FS, vmlinux *btfObject, ksyms []Symbol) {
	seen := map[string]bool{"": true}
	for _, s := range ksyms {
		if seen[s.Module] {
			continue
		}
		seen[s.Module] = true
		obj, err := loadBTF(fsys, s.Module, vmlinux, b.keep)
		if errors.Is(err, fs.ErrNotExist) {
			slog.Debug("module has no BTF", "module", s.Module)
			continue
		}
		if err != nil {
			slog.Warn("skipping module BTF", "module", s.Module, "err", err)
			continue
		}
		b.objects[s.Module] = obj
	}
}

// btfSymbols returns the kallsyms symbols that have a BTF prototype: the
// traceable set assumed when tracefs cannot be read.
func (b *builder) btfSymbols(ksyms []Symbol) []Symbol {
	var out []Symbol
	for _, s := range ksyms {
		if _, _, ok := b.resolve(s.Module, s.Name); ok {
			out = append(out, s)
		}
	}
	return out
}

// resolve finds the BTF prototype of a symbol. It reports the BTF name it
// matched in note when that differs from the symbol, or why there is none.
func (b *builder) resolve(module, name string) (fn btfFunc, note string, ok bool) {
	obj, hasBTF := b.objects[module]
	if !hasBTF {
		return noBTF, "module " + module + " has no BTF", false
	}
	if i, found := obj.funcs.index[name]; found {
		return pick(obj, i)
	}
	base, suffix := splitSuffix(name)
	if suffix == "" {
		return noBTF, "not in BTF", false
	}
	if !suffixKeepsABI(suffix) {
		return noBTF, suffixNote(base, suffix), false
	}
	i, found := obj.funcs.index[base]
	if !found {
		return noBTF, "not in BTF (nor " + base + ")", false
	}
	fn, note, ok = pick(obj, i)
	if ok {
		note = "renamed by LTO; prototype of " + base
	}
	return fn, note, ok
}

// cloneReturn finds the prototype whose return type a compiler clone
// without a prototype keeps: that of the function it was made from, which
// must be the only BTF function of its name. It returns noBTF when there
// is none.
func (b *builder) cloneReturn(module, name string) (string, btfFunc) {
	base, suffix := splitSuffix(name)
	obj, hasBTF := b.objects[module]
	if !hasBTF || !suffixKeepsReturn(suffix) {
		return base, noBTF
	}
	i, found := obj.funcs.index[base]
	if !found || len(obj.funcs.ids[i]) != 1 {
		return base, noBTF
	}
	return base, btfFunc{obj.funcs.ids[i][0], obj.spec, i}
}

// btfFunc is a BTF function: the type ID of its prototype, the BTF object
// of that ID, and its index in the object's btfFuncs. A name BTF has but
// whose prototype cannot be trusted has only the index.
type btfFunc struct {
	id    btf.TypeID
	spec  *btf.Spec
	index int32
}

// noBTF is the btfFunc of a name BTF does not have.
var noBTF = btfFunc{index: -1}

// pick chooses among the BTF functions of obj's i-th name. Static
// functions of several files can share a name; their prototypes are only
// trusted when they agree.
func pick(obj *btfObject, i int32) (btfFunc, string, bool) {
	name, ids, spec := obj.funcs.names[i], obj.funcs.ids[i], obj.spec
	fn := btfFunc{ids[0], spec, i}
	if len(ids) == 1 {
		return fn, "", true
	}
	var first string
	for j, id := range ids {
		typ, err := spec.TypeByID(id)
		if err != nil {
			return btfFunc{index: i}, fmt.Sprintf("BTF prototype of %s unreadable: %v", name, err), false
		}
		proto, ok := typ.(*btf.Func)
		if !ok {
			return btfFunc{index: i}, fmt.Sprintf("BTF type %d of %s is %s, not a function", id, name, typ), false
		}
		decl := declare(proto.Type, "")
		if j == 0 {
			first = decl
		} else if decl != first {
			return btfFunc{index: i}, fmt.Sprintf("BTF has %d different prototypes for %s", len(ids), name), false
		}
	}
	return fn, "", true
}

// build makes the sorted function list: the traceable set first, then the
// BTF functions that are not in it.
func (b *builder) build(traced []Symbol, source Source) []Function {
	type group struct {
		addrs []uint64
		count int
	}
	// Sized for the symbols, nearly one group each, and the groups held
	// by value: growing them as they filled, one allocation a group, cost
	// 10 MB and 55,000 allocations more per load (this machine's kernel).
	index := make(map[symKey]int, len(traced))
	keys := make([]symKey, 0, len(traced))
	groups := make([]group, 0, len(traced))
	for _, s := range traced {
		k := symKey{s.Module, s.Name}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			keys = append(keys, k)
			groups = append(groups, group{})
		}
		groups[i].count++
		groups[i].addrs = append(groups[i].addrs, s.Addr)
	}

	b.used = make(map[string][]bool, len(b.objects))
	for module, obj := range b.objects {
		b.used[module] = make([]bool, len(obj.funcs.names))
	}
	funcs := make([]Function, 0, len(keys)+len(b.objects[""].funcs.names)/4)
	for i, k := range keys {
		g := &groups[i]
		// A name kallsyms lists more often than the traceable set (a
		// notrace static function of the same name elsewhere) has that
		// many copies: the kernel looks trampolines up by name and may
		// find the other (p_start in kernel/trace and in AppArmor).
		f := Function{Name: k.name, Module: k.module, Traceable: true, Copies: max(g.count, len(b.ksyms[k]))}
		addrs := symbolAddrs(g.addrs, b.ksyms[k])
		if source == FromFilterNames {
			addrs = b.ksyms[k]
			if len(addrs) != g.count {
				addrs = nil
				f.AddrNote = fmt.Sprintf("%d traceable of %d symbols named %s; which ones is unknown without %s", g.count, len(b.ksyms[k]), k.name, filterAddrs)
			}
		}
		f.Addrs = nonZero(addrs)
		if f.Addrs == nil && f.AddrNote == "" {
			f.AddrNote = "address hidden by the kernel"
		}
		fn, note, ok := b.resolve(k.module, k.name)
		f.ProtoNote = note
		if ok {
			f.BTFID, f.spec = fn.id, fn.spec
		} else if base, ret := b.cloneReturn(k.module, k.name); ret.id != 0 {
			f.RetID, f.spec = ret.id, ret.spec
			f.ProtoNote += "; it returns what " + base + " returns"
		}
		if fn.index >= 0 {
			// Not listed again as untraceable, also when its prototypes
			// disagree.
			b.used[k.module][fn.index] = true
		}
		funcs = append(funcs, f)
	}
	funcs = append(funcs, b.untraceable()...)
	// Sorted through keys: moving the Functions themselves as the sort
	// goes was a good part of the catalogue's load time.
	type key struct {
		symKey
		i int
	}
	order := make([]key, len(funcs))
	for i, f := range funcs {
		order[i] = key{symKey{f.Module, f.Name}, i}
	}
	slices.SortFunc(order, func(x, y key) int {
		return cmp.Or(strings.Compare(x.name, y.name), strings.Compare(x.module, y.module))
	})
	sorted := make([]Function, len(funcs))
	for i, k := range order {
		sorted[i] = funcs[k.i]
	}
	return sorted
}

// untraceable returns the BTF functions no traceable symbol matched, each
// with the reason.
func (b *builder) untraceable() []Function {
	b.indexClones()
	var out []Function
	for module, obj := range b.objects {
		for i, name := range obj.funcs.names {
			if b.used[module][i] {
				continue
			}
			k := symKey{module, name}
			f := Function{Name: name, Module: module, Addrs: nonZero(b.ksyms[k]), Copies: len(b.ksyms[k])}
			if fn, note, ok := pick(obj, int32(i)); ok {
				f.BTFID, f.spec = fn.id, fn.spec
			} else {
				f.ProtoNote = note
			}
			switch clones := b.clones[k]; {
			case b.ksyms[k] != nil:
				f.Reason = "not in available_filter_functions: notrace, or not patchable by ftrace"
			case len(clones) > 0:
				f.Reason = "no symbol of its own, only compiler clones: " + strings.Join(clones, ", ")
			default:
				f.Reason = "not in /proc/kallsyms: inlined into its callers, or freed after boot"
			}
			out = append(out, f)
		}
	}
	return out
}

// indexClones maps each base name to the suffixed symbols of kallsyms.
func (b *builder) indexClones() {
	b.clones = make(map[symKey][]string)
	for k := range b.ksyms {
		if base, suffix := splitSuffix(k.name); suffix != "" {
			bk := symKey{k.module, base}
			b.clones[bk] = append(b.clones[bk], k.name)
		}
	}
	for _, names := range b.clones {
		slices.Sort(names)
	}
}

// nonZero returns the known addresses, ascending, or nil.
func nonZero(addrs []uint64) []uint64 {
	var out []uint64
	for _, a := range addrs {
		if a != 0 {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// maxPatchOffset bounds how far into a function its ftrace location lies:
// past an ENDBR64 (4 bytes) with x86 IBT, or the BTI and patchable NOPs
// on arm64.
const maxPatchOffset = 16

// symbolAddrs maps ftrace locations (from available_filter_functions_addrs)
// to the kallsyms addresses of their symbols. kprobe.multi finds a call's
// cookie by the symbol address, so attaching at the ftrace location of a
// function that starts with ENDBR64 would give its calls no cookie.
func symbolAddrs(ftrace, ksyms []uint64) []uint64 {
	out := make([]uint64, len(ftrace))
	for i, a := range ftrace {
		out[i] = a
		found := false
		for _, s := range ksyms {
			if s <= a && a-s <= maxPatchOffset && (!found || s > out[i]) {
				out[i], found = s, true
			}
		}
	}
	return out
}
