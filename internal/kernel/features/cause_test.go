// SPDX-License-Identifier: Apache-2.0

package features

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// Lines of the test bed kernels' configs (/boot/config-*): Debian's 6.1
// leaves FPROBE off, its 6.12 turns it on, and its arm64 6.12 does not
// offer it at all.
const (
	configNotSet = "CONFIG_FTRACE=y\n# CONFIG_FPROBE is not set\nCONFIG_BPF_EVENTS=y\n"
	configOn     = "CONFIG_FTRACE=y\nCONFIG_FPROBE=y\nCONFIG_FPROBE_EVENTS=y\n"
	configAbsent = "CONFIG_FTRACE=y\nCONFIG_BPF_EVENTS=y\n"
)

func TestExplainKprobeLinks(t *testing.T) {
	refused := fmt.Errorf("bpf_link_kprobe_multi %w (requires >= v5.18)", ebpf.ErrNotSupported)
	for _, tc := range []struct {
		name   string
		facts  kernelFacts
		what   string
		since  version
		want   string
		causes []error
	}{
		{
			name:   "6.18 built without fprobe, config in /boot",
			facts:  kernelFacts{arch: "amd64", release: "6.18.44", config: configNotSet, configPath: "/boot/config-6.18.44"},
			what:   "kprobe.multi",
			since:  fprobeSince,
			want:   `kernel built without CONFIG_FPROBE (/boot/config-6.18.44 says "# CONFIG_FPROBE is not set")`,
			causes: []error{ErrNoFprobe},
		},
		{
			name:   "6.1 without config, BTF lacks fprobe",
			facts:  kernelFacts{arch: "amd64", release: "6.1.0-56-amd64", fprobeBTF: no},
			what:   "kprobe.multi",
			since:  fprobeSince,
			want:   "kernel built without CONFIG_FPROBE (kernel BTF has no register_fprobe_ips)",
			causes: []error{ErrNoFprobe},
		},
		{
			name:   "session on 6.1 without fprobe: both causes",
			facts:  kernelFacts{arch: "amd64", release: "6.1.0-56-amd64", config: configNotSet, configPath: "/boot/config-6.1.0-56-amd64"},
			what:   "kprobe.session",
			since:  version{6, 10},
			want:   `kernel too old: Linux 6.10 or newer needed, this is 6.1.0-56-amd64; and kernel built without CONFIG_FPROBE (/boot/config-6.1.0-56-amd64 says "# CONFIG_FPROBE is not set")`,
			causes: []error{ErrKernelTooOld, ErrNoFprobe},
		},
		{
			name:   "5.15 predates kprobe.multi",
			facts:  kernelFacts{arch: "amd64", release: "5.15.0-91-generic", fprobeBTF: no},
			what:   "kprobe.multi",
			since:  fprobeSince,
			want:   "kernel too old: Linux 5.18 or newer needed, this is 5.15.0-91-generic",
			causes: []error{ErrKernelTooOld},
		},
		{
			name:   "arm64 before 6.14",
			facts:  kernelFacts{arch: "arm64", release: "6.12.117+deb12-arm64", config: configAbsent, configPath: "/boot/config-6.12.117+deb12-arm64"},
			what:   "kprobe.multi",
			since:  fprobeSince,
			want:   "kernel too old: Linux 6.14 or newer needed (on arm64, kprobe.multi needs fprobe on the function graph tracer), this is 6.12.117+deb12-arm64",
			causes: []error{ErrKernelTooOld},
		},
		{
			name:   "arm64 7.3 built without fprobe",
			facts:  kernelFacts{arch: "arm64", release: "7.3.4", config: configAbsent, configPath: "/proc/config.gz"},
			what:   "kprobe.session",
			since:  version{6, 10},
			want:   "kernel built without CONFIG_FPROBE (/proc/config.gz has no CONFIG_FPROBE line: its dependencies are missing)",
			causes: []error{ErrNoFprobe},
		},
		{
			name:  "nothing to check",
			facts: kernelFacts{arch: "amd64", release: "6.12.0"},
			what:  "kprobe.multi",
			since: fprobeSince,
			want:  "the kernel refused kprobe.multi; it is new enough, so it was most likely built without CONFIG_FPROBE (neither a kernel config (/boot/config-6.12.0, /lib/modules/6.12.0/config, /proc/config.gz) nor kernel BTF to check)",
		},
		{
			name:  "fprobe there, refused all the same",
			facts: kernelFacts{arch: "amd64", release: "6.12.0", config: configOn, configPath: "/boot/config-6.12.0", fprobeBTF: no},
			what:  "kprobe.multi",
			since: fprobeSince,
			want:  "the kernel refused kprobe.multi though it is new enough and has CONFIG_FPROBE: " + refused.Error(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.facts.explain(tc.what, tc.since, refused)
			if err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
			for _, c := range []error{ErrKernelTooOld, ErrNoFprobe} {
				if want := slices.Contains(tc.causes, c); errors.Is(err, c) != want {
					t.Errorf("errors.Is(err, %v) = %v, want %v", c, !want, want)
				}
			}
			if !errors.Is(err, ebpf.ErrNotSupported) {
				t.Error("error does not match ebpf.ErrNotSupported")
			}
		})
	}
}

func TestConfigValue(t *testing.T) {
	config := "CONFIG_FPROBE=y\n# CONFIG_KPROBES is not set\nCONFIG_NR_CPUS=64\nCONFIG_LOCALVERSION=\"\"\n"
	for option, want := range map[string]string{
		"CONFIG_FPROBE":       "y",
		"CONFIG_KPROBES":      "n",
		"CONFIG_NR_CPUS":      "64",
		"CONFIG_LOCALVERSION": `""`,
		"CONFIG_FPROBE_EVENT": "",
		"CONFIG_NR":           "",
	} {
		if got := configValue(config, option); got != want {
			t.Errorf("%s = %q, want %q", option, got, want)
		}
	}
}

func TestReadConfigGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(configOn))
	zw.Close()
	dir := t.TempDir()
	for name, data := range map[string][]byte{"config.gz": buf.Bytes(), "config": []byte(configOn)} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readConfig(path)
		if err != nil || got != configOn {
			t.Errorf("readConfig(%s) = %q, %v", name, got, err)
		}
	}
}

func TestExplainKprobe(t *testing.T) {
	noTracefs := errors.New("creating tracefs event: neither debugfs nor tracefs are mounted")
	const config = "/proc/config.gz"
	for _, tc := range []struct {
		name        string
		facts       kernelFacts
		want        string
		unsupported bool
	}{
		{
			name:  "the PMU makes kprobes: the error passes",
			facts: kernelFacts{kprobePMU: true, config: "# CONFIG_KPROBES is not set\n", configPath: config},
			want:  noTracefs.Error(),
		},
		{
			name:        "built without kprobes",
			facts:       kernelFacts{config: "# CONFIG_KPROBES is not set\nCONFIG_HAVE_KPROBES=y\n", configPath: config},
			want:        `kernel built without CONFIG_KPROBES (/proc/config.gz says "# CONFIG_KPROBES is not set")`,
			unsupported: true,
		},
		{
			name:        "built with kprobes, without kprobe events",
			facts:       kernelFacts{config: "CONFIG_KPROBES=y\n# CONFIG_KPROBE_EVENTS is not set\n", configPath: config},
			want:        `kernel built without CONFIG_KPROBE_EVENTS (/proc/config.gz says "# CONFIG_KPROBE_EVENTS is not set")`,
			unsupported: true,
		},
		{
			name:  "kprobe events, tracefs not mounted",
			facts: kernelFacts{config: "CONFIG_KPROBES=y\nCONFIG_KPROBE_EVENTS=y\n", configPath: config},
			want:  "tracefs is not mounted, through which this kernel, without a kprobe PMU, makes kprobes (" + noTracefs.Error() + ")",
		},
		{
			name:  "no config to check, tracefs not mounted",
			facts: kernelFacts{},
			want:  "tracefs is not mounted, through which this kernel, without a kprobe PMU, makes kprobes (" + noTracefs.Error() + ")",
		},
		{
			name:  "tracefs mounted: the error passes",
			facts: kernelFacts{tracefs: true},
			want:  noTracefs.Error(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.facts.explainKprobe(noTracefs)
			if err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
			if errors.Is(err, ebpf.ErrNotSupported) != tc.unsupported {
				t.Errorf("errors.Is(err, ebpf.ErrNotSupported) = %v, want %v", !tc.unsupported, tc.unsupported)
			}
			if want := strings.HasPrefix(tc.want, "tracefs is not mounted"); errors.Is(err, ErrNoTracefs) != want {
				t.Errorf("errors.Is(err, ErrNoTracefs) = %v, want %v", !want, want)
			}
		})
	}
}
