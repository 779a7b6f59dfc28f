// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// Relocate applies the CO-RE relocations of every program in spec (field
// offsets in struct task_struct, and in the dentries and mounts of a
// file's path) against the kernel's BTF, once, and drops
// them from the instructions, so that loading needs none. Left to it,
// cilium/ebpf would redo them for every program it loads (twice per
// function for fentry), searching vmlinux and every module's BTF, and
// v0.22 does that unsafely from parallel loads that share a btf.Cache
// (concurrent map writes while decoding split BTF); rawbpf does none at
// all.
func Relocate(spec *ebpf.CollectionSpec, kernel *btf.Spec) error {
	for name, ps := range spec.Programs {
		if err := relocate(ps.Instructions, ps.ByteOrder, kernel); err != nil {
			return fmt.Errorf("program %s: %w", name, err)
		}
	}
	return nil
}

func relocate(insns asm.Instructions, bo binary.ByteOrder, kernel *btf.Spec) error {
	var relos []*btf.CORERelocation
	var at []*asm.Instruction
	for i := range insns {
		if r := btf.CORERelocationMetadata(&insns[i]); r != nil {
			relos = append(relos, r)
			at = append(at, &insns[i])
		}
	}
	if len(relos) == 0 {
		return nil
	}
	fixups, err := btf.CORERelocate(relos, []*btf.Spec{kernel}, bo, func(btf.Type) (btf.TypeID, error) {
		return 0, errors.New("trawl's programs use no local type IDs")
	})
	if err != nil {
		return fmt.Errorf("CO-RE relocations: %w", err)
	}
	for i, f := range fixups {
		if err := f.Apply(at[i]); err != nil {
			return fmt.Errorf("CO-RE relocation %s: %w", relos[i], err)
		}
		*at[i] = btf.WithCORERelocationMetadata(*at[i], nil)
	}
	return nil
}
