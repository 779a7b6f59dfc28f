// SPDX-License-Identifier: Apache-2.0

package features

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// Why a kernel has no kprobe.multi or kprobe.session links. The probes'
// errors match one or both with errors.Is, and ebpf.ErrNotSupported.
//
// cilium/ebpf words both the same, "not supported (requires >= v5.18)":
// its probe takes EINVAL (a kernel that does not know the link) and
// EOPNOTSUPP (a kernel built without CONFIG_FPROBE, where the link is a
// stub) alike, and link.KprobeMulti returns the probe's error, not the
// errno. So trawl tells them apart by the facts: version, architecture,
// kernel config, kernel BTF.
var (
	// ErrKernelTooOld: the kernel predates the link (5.18 for
	// kprobe.multi, 6.10 for kprobe.session), or is an arm64 kernel
	// before 6.14, which cannot have fprobe.
	ErrKernelTooOld = errors.New("kernel too old")
	// ErrNoFprobe: the kernel was built without CONFIG_FPROBE, which
	// the links are built on.
	ErrNoFprobe = errors.New("kernel built without CONFIG_FPROBE")
)

// fprobeFunc is a function of kernel/trace/fprobe.c, which only kernels
// built with CONFIG_FPROBE have (the kprobe.multi link code itself is
// there either way, as a stub returning EOPNOTSUPP without fprobe).
const fprobeFunc = "register_fprobe_ips"

// arm64Fprobe is the first release in which arm64 can have fprobe: it
// came with the rewrite of fprobe on the function graph tracer. Earlier,
// fprobe needed ftrace with regs, which arm64 does not have.
var arm64Fprobe = version{6, 14}

// fprobeSince is the release that brought fprobe and kprobe.multi.
var fprobeSince = version{5, 18}

// kernelFacts are what tells why the kernel has no kprobe link. liveFacts
// reads them from the running kernel; tests make them up.
type kernelFacts struct {
	arch    string // GOARCH
	release string // uname -r, e.g. "6.1.0-37-amd64"
	// config is the kernel's build configuration, "" when none was found;
	// configPath is where it was read.
	config, configPath string
	// fprobeBTF is yes when kernel BTF has fprobeFunc, no when it has
	// not, unknown when kernel BTF could not be read.
	fprobeBTF answer
	// kprobePMU says the kernel has the kprobe PMU, through which
	// cilium/ebpf makes classic kprobes (4.17, with CONFIG_KPROBE_EVENTS);
	// tracefs says tracefs is mounted, through which it makes them
	// without the PMU.
	kprobePMU, tracefs bool
}

// answer is yes, no, or unknown.
type answer int8

const (
	unknown answer = iota
	yes
	no
)

// version is a kernel release, major and minor.
type version struct{ major, minor int }

func (v version) atLeast(w version) bool {
	return v.major > w.major || v.major == w.major && v.minor >= w.minor
}

func (v version) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// parseRelease reads the version at the start of a release like
// "6.1.0-37-amd64"; ok is false when there is none.
func parseRelease(release string) (v version, ok bool) {
	_, err := fmt.Sscanf(release, "%d.%d", &v.major, &v.minor)
	return v, err == nil
}

// unsupported is a missing kprobe link and why: it matches its causes
// and ebpf.ErrNotSupported.
type unsupported struct {
	msg    string
	causes []error
}

func (e *unsupported) Error() string   { return e.msg }
func (e *unsupported) Unwrap() []error { return append([]error{ebpf.ErrNotSupported}, e.causes...) }

// explain says why the kernel refused the kprobe link named what (e.g.
// "kprobe.multi"), which needs Linux since; err is how it was refused.
func (f kernelFacts) explain(what string, since version, err error) error {
	v, known := parseRelease(f.release)
	need, because := since, ""
	if f.arch == "arm64" && !need.atLeast(arm64Fprobe) {
		need, because = arm64Fprobe, fmt.Sprintf(" (on arm64, %s needs fprobe on the function graph tracer)", what)
	}
	var parts []string
	var causes []error
	if known && !v.atLeast(need) {
		parts = append(parts, fmt.Sprintf("%v: Linux %s or newer needed%s, this is %s", ErrKernelTooOld, need, because, f.release))
		causes = append(causes, ErrKernelTooOld)
	}
	// A kernel that cannot have fprobe is too old already: say so once.
	fprobePossible := !known || v.atLeast(fprobeSince) && (f.arch != "arm64" || v.atLeast(arm64Fprobe))
	fprobe, evidence := f.fprobe()
	if fprobePossible && fprobe == no {
		parts = append(parts, fmt.Sprintf("%v (%s)", ErrNoFprobe, evidence))
		causes = append(causes, ErrNoFprobe)
	}
	switch {
	case len(causes) > 0:
		return &unsupported{strings.Join(parts, "; and "), causes}
	case fprobe == unknown:
		return &unsupported{msg: fmt.Sprintf("the kernel refused %s; it is new enough, so it was most likely built without CONFIG_FPROBE (%s)", what, evidence)}
	}
	return fmt.Errorf("the kernel refused %s though it is new enough and has CONFIG_FPROBE: %w", what, err)
}

// fprobe tells whether the kernel has CONFIG_FPROBE, and how that is
// known: from its config when there is one, else from its BTF.
func (f kernelFacts) fprobe() (answer, string) {
	if f.config != "" {
		v, evidence := f.configOption("CONFIG_FPROBE")
		if v == "y" {
			return yes, evidence
		}
		return no, evidence
	}
	switch f.fprobeBTF {
	case yes:
		return yes, "kernel BTF has " + fprobeFunc
	case no:
		return no, "kernel BTF has no " + fprobeFunc
	}
	return unknown, "neither a kernel config (" + strings.Join(configPaths(f.release), ", ") + ") nor kernel BTF to check"
}

// configOption returns option's value in the kernel config, as
// configValue does, and where and how the config says it.
func (f kernelFacts) configOption(option string) (value, evidence string) {
	switch value = configValue(f.config, option); value {
	case "":
		return value, f.configPath + " has no " + option + " line: its dependencies are missing"
	case "n":
		return value, f.configPath + ` says "# ` + option + ` is not set"`
	}
	return value, f.configPath + " has " + option + "=" + value
}

// ErrNoTracefs is returned when the kernel makes classic kprobes through
// tracefs, having no kprobe PMU, and tracefs is not mounted.
var ErrNoTracefs = errors.New("tracefs is not mounted")

// explainKprobe says why a classic kprobe could not be made, err, on a
// kernel without the kprobe PMU (/sys/bus/event_source/devices/kprobe):
// cilium/ebpf then makes it through tracefs (kprobe_events), which a
// kernel built without kprobe events does not have either, and which may
// not be mounted. With the PMU, err passes as it is.
func (f kernelFacts) explainKprobe(err error) error {
	if f.kprobePMU {
		return err
	}
	if f.config != "" {
		for _, option := range []string{"CONFIG_KPROBES", "CONFIG_KPROBE_EVENTS"} {
			if v, evidence := f.configOption(option); v != "y" {
				return &unsupported{msg: fmt.Sprintf("kernel built without %s (%s)", option, evidence)}
			}
		}
	}
	if !f.tracefs {
		return fmt.Errorf("%w, through which this kernel, without a kprobe PMU, makes kprobes (%w)", ErrNoTracefs, err)
	}
	return err
}

// configValue returns the value of option in a kernel config: "y", "m",
// a string or number, "n" for "# option is not set", "" when absent.
func configValue(config, option string) string {
	for line := range strings.Lines(config) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, option+"="); ok {
			return v
		}
		if line == "# "+option+" is not set" {
			return "n"
		}
	}
	return ""
}

// configPaths are where distributions keep the running kernel's config,
// in the order libbpf and bpftool look (plus the modules directory, where
// Fedora and Debian's merged /usr put it).
func configPaths(release string) []string {
	return []string{"/boot/config-" + release, "/lib/modules/" + release + "/config", "/proc/config.gz"}
}

// kprobePMUPath is the kprobe PMU's directory in sysfs.
const kprobePMUPath = "/sys/bus/event_source/devices/kprobe"

// liveFacts reads the facts of the running kernel.
func liveFacts() kernelFacts {
	f := kernelFacts{arch: runtime.GOARCH}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		f.release = unix.ByteSliceToString(u.Release[:])
	}
	for _, p := range configPaths(f.release) {
		if text, err := readConfig(p); err == nil {
			f.config, f.configPath = text, p
			break
		}
	}
	_, err := os.Stat(kprobePMUPath)
	f.kprobePMU = err == nil
	f.tracefs = kernel.TracefsMounted()
	if spec, err := kernel.KernelTypes(); err == nil {
		var fn *btf.Func
		switch err := spec.TypeByName(fprobeFunc, &fn); {
		case err == nil:
			f.fprobeBTF = yes
		case errors.Is(err, btf.ErrNotFound):
			f.fprobeBTF = no
		}
	}
	return f
}

// readConfig reads a kernel config file, gunzipping a .gz one.
func readConfig(path string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	var r io.Reader = bufio.NewReader(file)
	if strings.HasSuffix(path, ".gz") {
		if r, err = gzip.NewReader(r); err != nil {
			return "", fmt.Errorf("read %s: %w", path, err)
		}
	}
	text, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return string(text), nil
}
