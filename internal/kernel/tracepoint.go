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

// tracepointProto returns the prototype of the tracepoint whose
// btf_trace_ typedef is typ: the typedef's, a pointer to the prototype
// its programs are called with, less the first argument (void *, the
// tracepoint's private data, which tp_btf programs do not see).
func tracepointProto(event string, typ btf.Type) (*btf.Func, error) {
	def, ok := typ.(*btf.Typedef)
	if !ok {
		return nil, fmt.Errorf("%s%s is a %T, not a typedef", tracepointPrefix, event, typ)
	}
	ptr, ok := def.Type.(*btf.Pointer)
	if !ok {
		return nil, fmt.Errorf("%s%s is not a pointer", tracepointPrefix, event)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok || len(proto.Params) == 0 {
		return nil, fmt.Errorf("%s%s does not point to a prototype taking a context", tracepointPrefix, event)
	}
	params := slices.Clone(proto.Params[1:])
	for i := range params {
		if params[i].Name == "" {
			params[i].Name = fmt.Sprintf("arg%d", i)
		}
	}
	return &btf.Func{Name: event, Type: &btf.FuncProto{Return: proto.Return, Params: params}, Linkage: btf.GlobalFunc}, nil
}
