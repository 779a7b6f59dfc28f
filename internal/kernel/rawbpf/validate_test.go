// SPDX-License-Identifier: Apache-2.0

package rawbpf_test

import (
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/kernel/rawbpf"
)

// These checks fail before any bpf(2) call, so they run on the host.

func TestLoadTracingChecksBTFID(t *testing.T) {
	body := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	for _, spec := range []rawbpf.TracingSpec{
		{Name: "multi_with_id", AttachType: rawbpf.AttachTraceFEntryMulti, AttachBTFID: 1, Instructions: body},
		{Name: "fsession_without_id", AttachType: rawbpf.AttachTraceFSession, Instructions: body},
		{Name: "empty", AttachType: rawbpf.AttachTraceFSession, AttachBTFID: 1},
	} {
		if prog, err := rawbpf.LoadTracing(&spec); err == nil {
			prog.Close()
			t.Errorf("%s: loaded", spec.Name)
		}
	}
}

func TestAttachTracingMultiChecksArgs(t *testing.T) {
	for name, c := range map[string]struct {
		at      rawbpf.AttachType
		ids     []btf.TypeID
		cookies []uint64
	}{
		"single attach type": {rawbpf.AttachTraceFSession, []btf.TypeID{1}, nil},
		"no functions":       {rawbpf.AttachTraceFEntryMulti, nil, nil},
		"cookie count":       {rawbpf.AttachTraceFEntryMulti, []btf.TypeID{1, 2}, []uint64{1}},
	} {
		if _, err := rawbpf.AttachTracingMulti(nil, c.at, c.ids, c.cookies); err == nil {
			t.Errorf("%s: attached", name)
		}
	}
}

func TestAttachTypeString(t *testing.T) {
	if got := rawbpf.AttachTraceFSessionMulti.String(); got != "BPF_TRACE_FSESSION_MULTI" {
		t.Errorf("String() = %q", got)
	}
	if !rawbpf.AttachTraceFExitMulti.Multi() || rawbpf.AttachTraceFSession.Multi() {
		t.Error("Multi() is wrong")
	}
}
