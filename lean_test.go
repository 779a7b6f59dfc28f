// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"slices"
	"testing"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// TestLeanest checks that a trace without features gets the lean build,
// configured as the full one was, and that any feature constant set keeps
// the full build.
func TestLeanest(t *testing.T) {
	full, err := bpf.LoadCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := configure(full, Config{RingBufferSize: 1 << 20}, 3); err != nil {
		t.Fatal(err)
	}
	if err := full.Variables[bpf.CaptureVarIpBits].Set(uint32(9)); err != nil {
		t.Fatal(err)
	}
	got, err := leanest(full)
	if err != nil {
		t.Fatal(err)
	}
	if got == full {
		t.Fatal("a trace without features got the full build")
	}
	var bits uint32
	if err := got.Variables[bpf.CaptureVarIpBits].Get(&bits); err != nil || bits != 9 {
		t.Errorf("lean ip_bits %d (%v), want 9", bits, err)
	}
	if n := got.Maps[bpf.CaptureMapEvents].MaxEntries; n != 1<<20 {
		t.Errorf("lean ring buffer of %d bytes, want %d", n, 1<<20)
	}
	if n := got.Maps[bpf.CaptureMapPlans].MaxEntries; n != 3 {
		t.Errorf("lean plans map of %d entries, want 3", n)
	}

	var features []string
	for name := range full.Variables {
		if _, ok := got.Variables[name]; !ok {
			features = append(features, name)
		}
	}
	slices.Sort(features)
	want := []string{
		bpf.CaptureVarEntryGate, bpf.CaptureVarErrnoKept, bpf.CaptureVarErrorChains,
		bpf.CaptureVarFilterAt, bpf.CaptureVarFilterCgroup, bpf.CaptureVarFilterCgroupExact,
		bpf.CaptureVarFilterCgroupLevel, bpf.CaptureVarFilterComm, bpf.CaptureVarFilterErrno,
		bpf.CaptureVarFilterErrors, bpf.CaptureVarFilterPids, bpf.CaptureVarMinDuration,
		bpf.CaptureVarPidnsDev, bpf.CaptureVarPidnsIno,
		bpf.CaptureVarShadowByTid, bpf.CaptureVarShowOn, bpf.CaptureVarTaskByHelpers,
		bpf.CaptureVarTrackOn, bpf.CaptureVarTrackTimeout, bpf.CaptureVarWantStack,
		bpf.CaptureVarWantUstack,
	}
	if !slices.Equal(features, want) {
		t.Errorf("the lean build leaves out %v, want %v", features, want)
	}
	for _, name := range features {
		v := full.Variables[name]
		was := v.Value[len(v.Value)-1]
		v.Value[len(v.Value)-1] = 1
		if got, err := leanest(full); err != nil || got != full {
			t.Errorf("with %s set: the lean build (err %v), want the full one", name, err)
		}
		v.Value[len(v.Value)-1] = was
	}
}
