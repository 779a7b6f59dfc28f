// SPDX-License-Identifier: Apache-2.0

package features_test

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// expected says, per test bed kernel, which features it has, by
// features.All name. Anything not listed must be unsupported.
var expected = map[string][]string{
	"amd64-5.10": {"kprobe", "fentry", "ring buffer"},
	"amd64-6.1":  append(since511, "fentry", "func args"),
	"amd64-6.12": append(since511, "fentry", "func args", "kprobe.multi", "kprobe.session", "raw_tp cookie"),
	"amd64-7.3":  append(since511, "fentry", "func args", "kprobe.multi", "kprobe.session", "raw_tp cookie", "fsession", "tracing_multi"),
	"arm64-5.10": {"kprobe", "ring buffer"},
	"arm64-6.12": append(since511, "fentry", "func args", "raw_tp cookie"),
	"arm64-7.3":  append(since511, "fentry", "func args", "kprobe.multi", "kprobe.session", "raw_tp cookie", "fsession"),
}

// since511 are the features every test bed kernel from 6.1 has.
var since511 = []string{"kprobe", "ring buffer", "task storage", "task btf", "global ptr args"}

func TestProbesMatchKernel(t *testing.T) {
	guest.Require(t)
	want, ok := expected[guest.Kernel()]
	if !ok {
		t.Fatalf("no expectations for kernel %s", guest.Kernel())
	}
	has := map[string]bool{}
	for _, name := range want {
		has[name] = true
	}
	report := features.Probe()
	t.Logf("%s\n%s\n%s", report, features.MarkdownHeader(), report.Markdown(guest.Kernel()))
	for _, res := range report {
		switch {
		case has[res.Feature.Name] && res.Err != nil:
			t.Errorf("%s: want supported, got %v", res.Feature.Name, res.Err)
		case !has[res.Feature.Name] && res.Err == nil:
			t.Errorf("%s: want unsupported, but the probe succeeded", res.Feature.Name)
		case !has[res.Feature.Name] && !errors.Is(res.Err, ebpf.ErrNotSupported):
			t.Errorf("%s: want ebpf.ErrNotSupported, got %v", res.Feature.Name, res.Err)
		}
	}
}

// TestProbesAreMemoised checks a second call returns the first answer.
func TestProbesAreMemoised(t *testing.T) {
	guest.Require(t)
	for _, f := range features.All {
		if first, second := f.Probe(), f.Probe(); first != second {
			t.Errorf("%s: first call %v, second %v", f.Name, first, second)
		}
	}
}

// kprobeCauses says, per test bed kernel without kprobe links, why:
// Debian's amd64 6.1 is built without CONFIG_FPROBE, and arm64 has no
// fprobe before 6.14.
var kprobeCauses = map[string]error{
	"amd64-5.10": features.ErrKernelTooOld,
	"arm64-5.10": features.ErrKernelTooOld,
	"amd64-6.1":  features.ErrNoFprobe,
	"arm64-6.12": features.ErrKernelTooOld,
}

func TestKprobeLinksMissingCause(t *testing.T) {
	guest.Require(t)
	cause, ok := kprobeCauses[guest.Kernel()]
	if !ok {
		t.Skipf("%s has kprobe.multi", guest.Kernel())
	}
	err := features.KprobeMulti()
	t.Log(err)
	if !errors.Is(err, cause) || !errors.Is(err, ebpf.ErrNotSupported) {
		t.Errorf("kprobe.multi: got %v, want an error matching %v and ebpf.ErrNotSupported", err, cause)
	}
}
