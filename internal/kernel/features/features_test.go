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
	"amd64-6.1":  {"fentry", "func args"},
	"amd64-6.12": {"fentry", "func args", "kprobe.multi", "kprobe.session"},
	"amd64-7.3":  {"fentry", "func args", "kprobe.multi", "kprobe.session", "fsession", "tracing_multi"},
	"arm64-6.12": {"fentry", "func args"},
	"arm64-7.3":  {"fentry", "func args", "kprobe.multi", "kprobe.session", "fsession"},
}

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
