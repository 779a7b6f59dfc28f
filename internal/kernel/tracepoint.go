// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// TracepointPrefix starts the Name of every tracepoint of a catalogue:
// "tp:SUBSYSTEM:EVENT".
const TracepointPrefix = "tp:"

// Tracepoints returns the kernel's BTF-typed tracepoints, sorted by name:
// the events of tracefs whose event has a btf_trace_EVENT typedef in
// vmlinux BTF, which tp_btf programs attach to. Their Name is
// "tp:SUBSYSTEM:EVENT" (see Function.Event).
func (c *Catalogue) Tracepoints() []Function { return c.tracepoints }

// IsTracepoint reports whether f is a tracepoint, not a function.
func (f *Function) IsTracepoint() bool { return f.Event != "" }

// readTracepoints lists the events of the first tracefs mount that has
// some, keeping those vmlinux declares a btf_trace_ typedef for. The
// typedef names the event only: its subsystem is the directory tracefs
// lists it in. Without tracefs there are none.
func readTracepoints(fsys fs.FS, vmlinux *btfObject) []Function {
	var tps []Function
	for _, dir := range tracefsDirs {
		events := path.Join(dir, "events")
		subsystems, err := fs.ReadDir(fsys, events)
		if err != nil {
			continue
		}
		for _, sub := range subsystems {
			if !sub.IsDir() {
				continue
			}
			entries, err := fs.ReadDir(fsys, path.Join(events, sub.Name()))
			if err != nil {
				continue
			}
			for _, ev := range entries {
				id, ok := vmlinux.funcs.tracepoints[ev.Name()]
				if !ok || !ev.IsDir() {
					continue
				}
				tps = append(tps, Function{
					Name:      TracepointPrefix + sub.Name() + ":" + ev.Name(),
					Event:     ev.Name(),
					Subsystem: sub.Name(),
					BTFID:     id,
					Traceable: true,
					Copies:    1,
					spec:      vmlinux.spec,
					namesID:   vmlinux.funcs.first(bpfTracePrefix + ev.Name()),
				})
			}
		}
		if len(tps) > 0 {
			break
		}
	}
	slices.SortFunc(tps, func(a, b Function) int { return strings.Compare(a.Name, b.Name) })
	return tps
}

// bpfTracePrefix starts the name of the function through which the
// kernel calls the programs of the tracepoints of one event class
// (__bpf_trace_CLASS): the same arguments as the btf_trace_ typedef's, by
// name. A class defined with TRACE_EVENT is named after its event; the
// events of a DECLARE_EVENT_CLASS are not, and their arguments stay
// unnamed.
const bpfTracePrefix = "__bpf_trace_"

// first returns the BTF ID of the first function called name, 0 if none.
func (f btfFuncs) first(name string) btf.TypeID {
	if i, ok := f.index[name]; ok {
		return f.ids[i][0]
	}
	return 0
}

// tracepointProto returns the prototype of the tracepoint whose
// btf_trace_ typedef is typ: the typedef's, a pointer to the prototype
// its programs are called with, less the first argument (void *, the
// tracepoint's private data, which tp_btf programs do not see). Its
// arguments take the names of those of named, the tracepoint's
// __bpf_trace_ function, if not nil; else they are arg0, arg1...
func tracepointProto(event string, typ btf.Type, named *btf.Func) (*btf.Func, error) {
	def, ok := typ.(*btf.Typedef)
	if !ok {
		return nil, fmt.Errorf("%s%s is a %T, not a typedef", btfTracePrefix, event, typ)
	}
	ptr, ok := def.Type.(*btf.Pointer)
	if !ok {
		return nil, fmt.Errorf("%s%s is not a pointer", btfTracePrefix, event)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok || len(proto.Params) == 0 {
		return nil, fmt.Errorf("%s%s does not point to a prototype taking a context", btfTracePrefix, event)
	}
	var names []btf.FuncParam
	if named != nil {
		if p, ok := named.Type.(*btf.FuncProto); ok && len(p.Params) == len(proto.Params) {
			names = p.Params[1:]
		}
	}
	params := slices.Clone(proto.Params[1:])
	for i := range params {
		switch {
		case names != nil:
			params[i].Name = names[i].Name
		case params[i].Name == "":
			params[i].Name = fmt.Sprintf("arg%d", i)
		}
	}
	return &btf.Func{Name: event, Type: &btf.FuncProto{Return: proto.Return, Params: params}, Linkage: btf.GlobalFunc}, nil
}
