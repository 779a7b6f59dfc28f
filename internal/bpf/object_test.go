// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// TestObjectsLoadOn510 checks the committed objects of both architectures
// hold no instruction 5.10 refuses before it verifies anything: an atomic
// other than a plain add (fetch, and, or, xor, xchg and cmpxchg came in
// 5.12). 5.10 rejects the whole program for one, even in code a plan never
// runs ("BPF_STX uses reserved fields"), so every function is skipped.
func TestObjectsLoadOn510(t *testing.T) {
	objects, err := filepath.Glob("*_bpfel.o")
	if err != nil || len(objects) == 0 {
		t.Fatalf("no committed objects: %v", err)
	}
	for _, obj := range objects {
		spec, err := ebpf.LoadCollectionSpec(obj)
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		for name, prog := range spec.Programs {
			for i, ins := range prog.Instructions {
				if op := ins.OpCode.AtomicOp(); op != asm.InvalidAtomic && op != asm.AddAtomic {
					t.Errorf("%s: program %s, instruction %d: %v needs 5.12", obj, name, i, ins)
				}
			}
		}
	}
}
