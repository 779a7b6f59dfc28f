// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/selector"
	"github.com/trawl-dev/trawl/internal/session"
)

// Backend names.
const (
	BackendAuto          = "auto"
	BackendFentry        = "fentry"
	BackendKprobeMulti   = "kprobe-multi"
	BackendKprobeSession = "kprobe-session"
	BackendFsession      = "fsession"
	BackendTracingMulti  = "tracing-multi"
)

// Backends lists the backend names Config.Backend takes, auto first.
var Backends = backendNames()

func backendNames() []string { return session.Names() }

// ChooseBackend returns the backend Open would use for cfg on the running
// kernel, and why. For BackendAuto it weighs attach cost, which grows with
// the number of functions N, against per-call cost (measured numbers in
// the README, "Choosing a backend"):
//
//   - tracing-multi (7.2, x86-64) when every selected function is in
//     vmlinux: one verifier run and one link for any N, and trampoline
//     per-call cost, the lowest there is.
//   - For N <= 20, one trampoline program per function: fsession (7.0;
//     one load per function, exact pairing), else fentry/fexit (two
//     loads). The loads run in parallel and take well under a second.
//   - For larger N, a kprobe link for all functions at once: kprobe.session
//     (6.10; one program, no exit run for filtered entries), else
//     kprobe.multi (5.18). Attaching stays about constant in N, while
//     per-function trampoline loads grow linearly.
//   - Without either, fsession or fentry, for as many functions as half
//     the available memory holds (ErrNotEnoughMemory).
//
// fsession and tracing-multi are passed over when the selection has
// functions in modules, which they cannot attach.
func ChooseBackend(cfg Config) (name, why string, err error) {
	cat, release, err := kernel.Hold()
	if err != nil {
		return "", "", err
	}
	defer release()
	sel, err := selector.Select(cat, cfg.Patterns)
	if err != nil {
		return "", "", publicError(err)
	}
	b, why, err := session.Choose(cfg.Backend, sel, session.LiveProbe)
	if err != nil {
		return "", "", err
	}
	return b.Name, why, nil
}

// Features is what the running kernel offers for tracing, one probe a
// feature.
type Features struct{ report features.Report }

// ProbeFeatures probes the running kernel for each attach mechanism.
func ProbeFeatures() Features { return Features{features.Probe()} }

// String lists the features one a line: name, yes or no, and why not.
func (f Features) String() string { return f.report.String() }

// Markdown returns the features as a row of a Markdown table for the
// kernel named kernel, below FeaturesMarkdownHeader.
func (f Features) Markdown(kernel string) string { return f.report.Markdown(kernel) }

// FeaturesMarkdownHeader returns the header of the Markdown table whose
// rows Features.Markdown returns.
func FeaturesMarkdownHeader() string { return features.MarkdownHeader() }
