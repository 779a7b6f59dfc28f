// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The deployment files, from this module's directory.
const (
	unitFile      = "../../deploy/trawl.service"
	daemonSetFile = "../../deploy/daemonset.yaml"
)

// TestSystemdUnit checks deploy/trawl.service with systemd's own verifier:
// no unknown keys, no bad assignments, a command that runs.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit cannot be verified here")
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	// The verifier wants the command to exist: point it at a stand-in.
	bin := filepath.Join(t.TempDir(), "trawl")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("ExecStart=/usr/bin/trawl ")) {
		t.Fatal("the unit does not start /usr/bin/trawl, where the packages install it")
	}
	path := filepath.Join(t.TempDir(), "trawl.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/bin/trawl"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// maxExposure is the most `systemd-analyze security` may rate
// deploy/trawl.service, in tenths, as its --threshold takes it.
const maxExposure = 35

// exposureLine is systemd-analyze security's verdict on a unit.
var exposureLine = regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+(?:\.[0-9]+)?)`)

// TestSystemdUnitSecurity rates deploy/trawl.service with systemd's own
// assessment of its sandboxing, and fails above an exposure of 3.5 (of
// 10): a setting dropped from the unit, or one systemd does not know,
// shows there.
func TestSystemdUnitSecurity(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit cannot be rated here")
	}
	out, err := exec.Command(analyze, "security", "--offline=yes", "--no-pager",
		"--threshold="+strconv.Itoa(maxExposure), unitFile).CombinedOutput()
	m := exposureLine.FindSubmatch(out)
	if m == nil {
		if bytes.Contains(out, []byte("unrecognized option")) {
			t.Skipf("systemd-analyze is older than systemd 250, which added --offline and --threshold:\n%s", out)
		}
		t.Fatalf("systemd-analyze security: %v, no exposure level in:\n%s", err, out)
	}
	exposure, perr := strconv.ParseFloat(string(m[1]), 64)
	if perr != nil {
		t.Fatal(perr)
	}
	t.Logf("systemd-analyze security: exposure %.1f", exposure)
	if exposure*10 > maxExposure || err != nil {
		t.Errorf("exposure %.1f (%v), want at most %.1f:\n%s", exposure, err, maxExposure/10.0, out)
	}
}

// TestDaemonSet reads deploy/daemonset.yaml as Kubernetes does, refusing
// unknown fields, and checks that it runs trawl's image with the unit's
// capabilities, the host mounts trawl reads, bounded resources, and
// probes and a metrics port that match its --listen.
func TestDaemonSet(t *testing.T) {
	data, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents, want a Namespace and a DaemonSet", len(docs))
	}
	var ns corev1.Namespace
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &ns); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &ds); err != nil {
		t.Fatal(err)
	}
	if ns.Kind != "Namespace" || ds.Kind != "DaemonSet" || ds.Namespace != ns.Name {
		t.Errorf("a %s %q and a %s in %q: want a DaemonSet in its Namespace", ns.Kind, ns.Name, ds.Kind, ds.Namespace)
	}
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if repo, _, _ := strings.Cut(c.Image, ":"); repo != "ghcr.io/trawl-dev/trawl" {
		t.Errorf("image %s", c.Image)
	}

	var caps []string
	for _, cap := range c.SecurityContext.Capabilities.Add {
		caps = append(caps, "CAP_"+string(cap))
	}
	if want := unitCapabilities(t); !slices.Equal(caps, want) {
		t.Errorf("capabilities %v, the unit's %v", caps, want)
	}
	if drop := c.SecurityContext.Capabilities.Drop; !slices.Equal(drop, []corev1.Capability{"ALL"}) {
		t.Errorf("drops %v, want ALL", drop)
	}
	if p := c.SecurityContext.Privileged; p != nil && *p {
		t.Error("the container is privileged")
	}

	mounts := map[string]string{}
	for _, v := range spec.Volumes {
		mounts[v.Name] = v.HostPath.Path
	}
	for _, m := range c.VolumeMounts {
		if mounts[m.Name] != m.MountPath || !m.ReadOnly {
			t.Errorf("mount %s at %s: host path %q, read-only %v", m.Name, m.MountPath, mounts[m.Name], m.ReadOnly)
		}
		delete(mounts, m.Name)
	}
	for _, path := range []string{"/sys/kernel/btf", "/sys/kernel/tracing"} {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path }) {
			t.Errorf("no mount of %s", path)
		}
	}
	if len(mounts) > 0 {
		t.Errorf("volumes not mounted: %v", mounts)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Limits.Cpu().IsZero() {
		t.Errorf("limits %v: want memory and CPU bounded", c.Resources.Limits)
	}

	listen := ""
	for i, arg := range c.Args {
		if arg == "--listen" && i+1 < len(c.Args) {
			listen = c.Args[i+1]
		}
	}
	if !slices.Contains(c.Args, "--stats") || listen == "" {
		t.Fatalf("args %v: want --stats --listen", c.Args)
	}
	if len(c.Ports) != 1 || !strings.HasSuffix(listen, ":"+itoa(c.Ports[0].ContainerPort)) {
		t.Errorf("ports %v, --listen %s", c.Ports, listen)
	}
	if ann := ds.Spec.Template.Annotations["prometheus.io/port"]; len(c.Ports) == 1 && ann != itoa(c.Ports[0].ContainerPort) {
		t.Errorf("prometheus.io/port %q, container port %v", ann, c.Ports)
	}
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("probe %+v: want GET /healthz", p)
		}
	}
}

// unitCapabilities returns the capabilities deploy/trawl.service bounds
// trawl to, checking that it gives no ambient ones: it runs trawl as
// root, whose capabilities after exec are the bounding set.
func unitCapabilities(t *testing.T) []string {
	t.Helper()
	settings := unitSettings(t)
	if ambient, ok := settings["AmbientCapabilities"]; ok {
		t.Errorf("the unit sets AmbientCapabilities=%s: root needs none", ambient)
	}
	return strings.Fields(settings["CapabilityBoundingSet"])
}

// unitSettings returns the settings of deploy/trawl.service, the last
// assignment of each key.
func unitSettings(t *testing.T) map[string]string {
	t.Helper()
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if key, value, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[key] = value
		}
	}
	return settings
}

// itoa formats a port number.
func itoa(n int32) string { return strconv.Itoa(int(n)) }
