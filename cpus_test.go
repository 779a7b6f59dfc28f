// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"encoding/binary"
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// TestConfigureCPUs checks that --cpu sets one bit a CPU in the capture
// program's filter, and turns the filter on only when CPUs are named.
func TestConfigureCPUs(t *testing.T) {
	spec, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := configureCPUs(spec, nil); err != nil {
		t.Fatal(err)
	}
	var on uint32
	if err := spec.Variables[bpf.CaptureVarFilterCpu].Get(&on); err != nil || on != 0 {
		t.Fatalf("no CPUs: filter %d (%v), want off", on, err)
	}
	if err := configureCPUs(spec, []int{0, 2, 63, 64, MaxCPUs - 1}); err != nil {
		t.Fatal(err)
	}
	if err := spec.Variables[bpf.CaptureVarFilterCpu].Get(&on); err != nil || on != 1 {
		t.Fatalf("CPUs named: filter %d (%v), want on", on, err)
	}
	var mask cpuMask
	if err := spec.Variables[bpf.CaptureVarFilterCpus].Get(&mask); err != nil {
		t.Fatal(err)
	}
	want := cpuMask{0: 1<<0 | 1<<2 | 1<<63, 1: 1, MaxCPUs/64 - 1: 1 << 63}
	if mask != want {
		t.Errorf("mask %x, want %x", mask, want)
	}
	if n := binary.Size(mask); n != int(spec.Variables[bpf.CaptureVarFilterCpus].Size()) {
		t.Errorf("mask of %d bytes, the program's filter_cpus %d", n, spec.Variables[bpf.CaptureVarFilterCpus].Size())
	}
}
