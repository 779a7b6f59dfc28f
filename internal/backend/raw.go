// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
)

// ResolveKfuncs points every kfunc call in insns at the kfunc of that name
// in vmlinux BTF, in place, without the prototype check cilium/ebpf would
// make. The session kfuncs need this: bpf_session_is_return and
// bpf_session_cookie take no argument on 6.10-6.19 and ctx from 7.0, and
// the capture program, declared with ctx, passes either verifier.
func ResolveKfuncs(insns asm.Instructions) error {
	for i, ins := range insns {
		if !ins.IsKfuncCall() {
			continue
		}
		call, err := rawbpf.KfuncCall(ins.Reference())
		if err != nil {
			return err
		}
		if sym := ins.Symbol(); sym != "" {
			call = call.WithSymbol(sym)
		}
		insns[i] = call.WithSource(ins.Source())
	}
	return nil
}

// RawInstructions returns a copy of a program's instructions for
// rawbpf.LoadTracing, which takes neither map references nor kfunc
// relocations: maps come from the loaded collection, kfuncs from vmlinux.
// (CO-RE relocations are applied beforehand: see Relocate.)
func RawInstructions(ps *ebpf.ProgramSpec, maps map[string]*ebpf.Map) (asm.Instructions, error) {
	insns := ps.Copy().Instructions
	for i := range insns {
		ins := &insns[i]
		if !ins.IsLoadFromMap() || ins.Reference() == "" {
			continue
		}
		m := maps[ins.Reference()]
		if m == nil {
			return nil, fmt.Errorf("program %s uses map %s, which was not loaded", ps.Name, ins.Reference())
		}
		if err := ins.AssociateMap(m); err != nil {
			return nil, err
		}
	}
	if err := ResolveKfuncs(insns); err != nil {
		return nil, err
	}
	return insns, nil
}
