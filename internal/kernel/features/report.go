// SPDX-License-Identifier: Apache-2.0

package features

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
)

// Feature is one probe with the name trawl shows for it.
type Feature struct {
	// Name is short, e.g. "kprobe.multi".
	Name string
	// Since names the first kernel that has the feature.
	Since string
	// Probe runs the (memoised) probe.
	Probe func() error
}

// All lists every feature trawl probes for, oldest first.
var All = []Feature{
	{"kprobe", "4.17", Kprobe},
	{"fentry", "5.5", Fentry},
	{"ring buffer", "5.8", RingBuffer},
	{"task storage", "5.11", TaskStorage},
	{"task btf", "5.11", TaskBTF},
	{"global ptr args", "5.12", GlobalPtrArgs},
	{"func args", "5.17", FuncArgHelpers},
	{"kprobe.multi", "5.18", KprobeMulti},
	{"kprobe.session", "6.10", KprobeSession},
	{"raw_tp cookie", "6.10", RawTracepointCookie},
	{"fsession", "7.0", Fsession},
	{"tracing_multi", "7.2, x86-64", TracingMulti},
}

// Result is the outcome of one probe.
type Result struct {
	Feature Feature
	// Err is nil when the kernel has the feature.
	Err error
}

// Supported reports whether the kernel has the feature. A probe that
// failed for another reason counts as unsupported; Err says why.
func (r Result) Supported() bool { return r.Err == nil }

// Report is the outcome of every probe in All.
type Report []Result

// Probe runs every probe in All.
func Probe() Report {
	r := make(Report, len(All))
	for i, f := range All {
		r[i] = Result{f, f.Probe()}
	}
	return r
}

// String lists the features one a line: name, yes or no, and why not.
func (r Report) String() string {
	var b strings.Builder
	for _, res := range r {
		switch {
		case res.Err == nil:
			fmt.Fprintf(&b, "%-15s yes\n", res.Feature.Name)
		case errors.Is(res.Err, ebpf.ErrNotSupported):
			fmt.Fprintf(&b, "%-15s no: %v\n", res.Feature.Name, res.Err)
		default:
			fmt.Fprintf(&b, "%-15s probe failed: %v\n", res.Feature.Name, res.Err)
		}
	}
	return b.String()
}

// MarkdownHeader returns the header and delimiter rows of the table whose
// rows Report.Markdown renders.
func MarkdownHeader() string {
	var head, sep strings.Builder
	head.WriteString("| kernel |")
	sep.WriteString("|---|")
	for _, f := range All {
		fmt.Fprintf(&head, " %s (%s) |", f.Name, f.Since)
		sep.WriteString("---|")
	}
	return head.String() + "\n" + sep.String()
}

// Markdown renders r as one table row labelled kernel: "yes", "no", or
// "error" for a probe that failed for another reason than a missing
// feature.
func (r Report) Markdown(kernel string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s |", kernel)
	for _, res := range r {
		cell := "yes"
		if res.Err != nil {
			cell = "no"
			if !errors.Is(res.Err, ebpf.ErrNotSupported) {
				cell = "error"
			}
		}
		fmt.Fprintf(&b, " %s |", cell)
	}
	return b.String()
}
