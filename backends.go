// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"strings"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/kernel/features"
	"github.com/trawl-dev/trawl/internal/selector"
)

// Backend names a way to attach the capture program to the functions
// (Config.Backend, Session.Backend).
type Backend string

// The backends; BackendAuto lets Open choose one (see ChooseBackend).
const (
	BackendAuto          Backend = "auto"
	BackendFentry        Backend = "fentry"
	BackendKprobe        Backend = "kprobe"
	BackendKprobeMulti   Backend = "kprobe-multi"
	BackendKprobeSession Backend = "kprobe-session"
	BackendFsession      Backend = "fsession"
	BackendTracingMulti  Backend = "tracing-multi"
)

// Backends lists the backends Config.Backend takes, auto first.
var Backends = backends()

func backends() []Backend {
	var all []Backend
	for _, name := range backend.Names() {
		all = append(all, Backend(name))
	}
	return all
}

// backendList lists the backends' names for a message, auto first.
func backendList() string {
	names := make([]string, len(Backends))
	for i, b := range Backends {
		names[i] = string(b)
	}
	return strings.Join(names, ", ")
}

// ChooseBackend returns the backend Open would use for cfg on the running
// kernel, and why. For BackendAuto it weighs attach cost, which grows
// with the number of functions, against per-call cost, as the registry's
// ranking says (the README, "Choosing a backend", has the numbers). It
// reads only the functions cfg names when its patterns name them in full,
// as Open does.
func ChooseBackend(cfg Config) (b Backend, why string, err error) {
	if err := UseBTF(cfg.BTF, cfg.BTFDir); err != nil {
		return "", "", err
	}
	cat, release, err := holdCatalogue(cfg)
	if err != nil {
		return "", "", err
	}
	defer release()
	sel, err := selector.Select(cat, cfg.Patterns)
	if err != nil {
		return "", "", publicError(err)
	}
	cat.WriteCache()
	functions := selectedFunctions(sel.Selected)
	chosen, why, err := chooseBackend(cfg, functions, backend.LiveProbe)
	if err != nil {
		return "", "", publicError(err)
	}
	return Backend(chosen.Name), why, nil
}

// chooseBackend picks the backend of cfg for the functions selected.
// --track looks for its objects in the arguments of every call, which
// fentry's programs cannot read before 5.17 (each reads only its own
// call's): there auto takes the classic kprobes, openly.
func chooseBackend(cfg Config, functions []*kernel.Function, probe backend.Probe) (*backend.Backend, string, error) {
	name := backend.Name(cfg.Backend)
	if cfg.Track != "" && (name == backend.Auto || name == "") && features.FuncArgHelpers() != nil {
		b, _, err := backend.Choose(backend.NameKprobe, len(functions), withoutProto(functions), len(cfg.Entries) > 0, probe)
		return b, "--track before 5.17: only kprobes read the arguments of every call", err
	}
	return backend.Choose(name, len(functions), withoutProto(functions), len(cfg.Entries) > 0, probe)
}

// Features is what the running kernel offers for tracing, one probe a
// feature, and what BackendAuto picks there.
type Features struct {
	report features.Report
	auto   []backend.AutoChoice
	// btf says where the kernel's BTF comes from, or why there is none.
	btf string
	// err says why no backend can attach, nil when one can.
	err error
}

// ProbeFeatures probes the running kernel for each attach mechanism, and
// says where its BTF comes from (the kernel, or a file: UseBTF).
func ProbeFeatures() Features {
	f := Features{report: features.Probe(), auto: backend.AutoChoices(backend.LiveProbe), btf: "from " + kernel.BTFOrigin()}
	if err := features.KernelBTF(); err != nil {
		f.btf = fmt.Sprintf("no: %v (give it from a file with --btf)", err)
	}
	if len(f.auto) == 0 {
		_, _, err := backend.Choose(backend.Auto, 1, 0, false, backend.LiveProbe)
		f.err = publicError(err)
	}
	return f
}

// Err returns nil when a backend can attach on the running kernel, else
// an ErrNoBackend that says why in one line, as Open would.
func (f Features) Err() error { return f.err }

// String lists the features one a line: name, yes or no, and why not;
// then where the kernel's BTF comes from, and the backends BackendAuto
// picks, by the number of functions selected.
func (f Features) String() string {
	var picks []string
	for _, a := range f.auto {
		n := fmt.Sprintf("%d-%d functions", a.Min, a.Max)
		switch {
		case a.Min == 1 && a.Max == 0:
			n = "any number of functions"
		case a.Max == 0:
			n = fmt.Sprintf("%d or more", a.Min)
		}
		picks = append(picks, string(a.Backend.Name)+" for "+n)
	}
	if len(picks) == 0 {
		picks = []string{"nothing: no backend can attach on this kernel"}
	}
	return f.report.String() + fmt.Sprintf("%-15s %s\n%-15s %s\n", "kernel BTF", f.btf, "auto picks", strings.Join(picks, ", "))
}

// Markdown returns the features as a row of a Markdown table for the
// kernel named kernel, below FeaturesMarkdownHeader.
func (f Features) Markdown(kernel string) string { return f.report.Markdown(kernel) }

// FeaturesMarkdownHeader returns the header of the Markdown table whose
// rows Features.Markdown returns.
func FeaturesMarkdownHeader() string { return features.MarkdownHeader() }

// withoutProto counts the functions without a BTF prototype, which
// trampolines cannot attach.
func withoutProto(fns []*kernel.Function) int {
	n := 0
	for _, fn := range fns {
		if !fn.HasProto() {
			n++
		}
	}
	return n
}
