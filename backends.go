// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"strings"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/selector"
)

// backendNeeds is the kernel feature each backend needs, as probed by
// internal/kernel/features.
var backendNeeds = map[string]func() error{
	BackendFentry:        features.FuncArgHelpers,
	BackendKprobeMulti:   features.KprobeMulti,
	BackendKprobeSession: features.KprobeSession,
	BackendFsession:      features.Fsession,
	BackendTracingMulti:  features.TracingMulti,
}

// autoTrampolineMax is the largest selection auto attaches with one
// trampoline program per function (fsession or fentry) when the kernel
// has a kprobe link for all of them at once; see ChooseBackend.
const autoTrampolineMax = 20

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
//     the available memory holds (backend.ErrNotEnoughMemory).
//
// fsession and tracing-multi are passed over when the selection has
// functions in modules, which they cannot attach.
func ChooseBackend(cfg Config) (name, why string, err error) {
	cat, err := kernel.Live()
	if err != nil {
		return "", "", err
	}
	sel, err := selector.Select(cat, cfg.Patterns)
	if err != nil {
		return "", "", err
	}
	return chooseBackend(cfg.Backend, sel)
}

func chooseBackend(name string, sel *selector.Selection) (string, string, error) {
	switch name {
	case BackendAuto, "":
		name, why := autoBackend(sel)
		return name, why, nil
	}
	need, ok := backendNeeds[name]
	if !ok {
		return "", "", fmt.Errorf("unknown backend %q (want %s)", name, strings.Join(Backends, ", "))
	}
	if err := need(); err != nil {
		return "", "", fmt.Errorf("%s backend: %w", name, err)
	}
	return name, "chosen by the caller", nil
}

func autoBackend(sel *selector.Selection) (string, string) {
	n := len(sel.Selected)
	modules := 0
	for _, fn := range sel.Selected {
		if fn.Module != "" {
			modules++
		}
	}
	has := func(b string) bool { return backendNeeds[b]() == nil }
	vmlinuxOnly := modules == 0
	switch {
	case vmlinuxOnly && has(BackendTracingMulti):
		return BackendTracingMulti, fmt.Sprintf("one program and one tracing_multi link for all %d functions, trampoline cost per call", n)
	case n <= autoTrampolineMax && vmlinuxOnly && has(BackendFsession):
		return BackendFsession, fmt.Sprintf("%d functions (at most %d): one fsession trampoline program each", n, autoTrampolineMax)
	case n <= autoTrampolineMax:
		return BackendFentry, fmt.Sprintf("%d functions (at most %d): one fentry and one fexit program each", n, autoTrampolineMax)
	case has(BackendKprobeSession):
		return BackendKprobeSession, fmt.Sprintf("%d functions (more than %d): one kprobe.session program and link for all", n, autoTrampolineMax)
	case has(BackendKprobeMulti):
		return BackendKprobeMulti, fmt.Sprintf("%d functions (more than %d): one kprobe.multi and one kretprobe.multi link for all", n, autoTrampolineMax)
	case vmlinuxOnly && has(BackendFsession):
		return BackendFsession, fmt.Sprintf("%d functions: no kprobe.multi on this kernel, so one fsession program each", n)
	}
	return BackendFentry, fmt.Sprintf("%d functions: no kprobe.multi on this kernel, so one fentry and one fexit program each", n)
}
