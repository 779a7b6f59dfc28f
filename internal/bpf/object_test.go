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

// TestCaptureSpecCopies checks that the capture program's spec, parsed
// once, is handed out as copies: what one session sets in its spec, the
// next does not see.
func TestCaptureSpecCopies(t *testing.T) {
	for name, load := range map[string]func() (*ebpf.CollectionSpec, error){"full": CaptureSpec, "lean": CaptureLeanSpec} {
		first, err := load()
		if err != nil {
			t.Fatal(err)
		}
		want := first.Maps[CaptureMapEvents].MaxEntries
		first.Maps[CaptureMapEvents].MaxEntries = want + 4096
		first.Programs[CaptureProgKprobeCapture].Instructions[0] = asm.Return()
		second, err := load()
		if err != nil {
			t.Fatal(err)
		}
		if got := second.Maps[CaptureMapEvents].MaxEntries; got != want {
			t.Errorf("%s: the second spec's ring buffer has %d entries, the first's set to %d, want %d", name, got, want+4096, want)
		}
		if second.Programs[CaptureProgKprobeCapture].Instructions[0].OpCode == asm.Return().OpCode {
			t.Errorf("%s: the second spec has the instruction set in the first", name)
		}
	}
}
