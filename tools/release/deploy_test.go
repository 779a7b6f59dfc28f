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
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The deployment files, from this module's directory.
const (
	unitFile       = "../../deploy/trawl.service"
	daemonSetFile  = "../../deploy/daemonset.yaml"
	podMonitorFile = "../../deploy/podmonitor.yaml"
	// The server of --listen, whose paths the probes must use.
	handlerFile = "../../metrics/handler.go"
	// The release the DaemonSet's image must be.
	changelogFile = "../../CHANGELOG.md"
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

// kubeObjects are the objects of deploy/daemonset.yaml.
type kubeObjects struct {
	ns  corev1.Namespace
	ds  appsv1.DaemonSet
	svc corev1.Service
	np  networkingv1.NetworkPolicy
}

// readKubeObjects reads deploy/daemonset.yaml as Kubernetes does,
// refusing unknown fields: a Namespace, then a DaemonSet, a Service and a
// NetworkPolicy in it.
func readKubeObjects(t *testing.T) *kubeObjects {
	t.Helper()
	data, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	var o kubeObjects
	docs := strings.Split(string(data), "\n---\n")
	objects := []struct {
		kind string
		obj  any
		meta *metav1.ObjectMeta
		tm   *metav1.TypeMeta
	}{
		{"Namespace", &o.ns, &o.ns.ObjectMeta, &o.ns.TypeMeta},
		{"DaemonSet", &o.ds, &o.ds.ObjectMeta, &o.ds.TypeMeta},
		{"Service", &o.svc, &o.svc.ObjectMeta, &o.svc.TypeMeta},
		{"NetworkPolicy", &o.np, &o.np.ObjectMeta, &o.np.TypeMeta},
	}
	if len(docs) != len(objects) {
		t.Fatalf("%d documents, want a Namespace, a DaemonSet, a Service and a NetworkPolicy", len(docs))
	}
	for i, want := range objects {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), want.obj); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		if want.tm.Kind != want.kind {
			t.Fatalf("document %d is a %s, want a %s", i+1, want.tm.Kind, want.kind)
		}
		if i > 0 && want.meta.Namespace != o.ns.Name {
			t.Errorf("the %s is in namespace %q, want %q", want.kind, want.meta.Namespace, o.ns.Name)
		}
	}
	return &o
}

// TestDaemonSet checks that deploy/daemonset.yaml runs the image of the
// release in CHANGELOG.md with the unit's capabilities and the runtime's
// seccomp profile, no service account token, the host mounts trawl
// reads, bounded resources, and probes and a metrics port that match its
// --listen, in a namespace that admits it.
func TestDaemonSet(t *testing.T) {
	o := readKubeObjects(t)
	if level := o.ns.Labels["pod-security.kubernetes.io/enforce"]; level != "privileged" {
		t.Errorf("namespace enforces Pod Security level %q: hostPID and host paths need privileged", level)
	}
	ds := o.ds
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	repo, tag, _ := strings.Cut(c.Image, ":")
	if repo != "ghcr.io/trawl-dev/trawl" {
		t.Errorf("image %s, want ghcr.io/trawl-dev/trawl", c.Image)
	}
	if want := strings.TrimPrefix(changelogVersion(t), "v"); tag != want {
		t.Errorf("image %s, want the tag of the release in CHANGELOG.md, %s", c.Image, want)
	}
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the pods get a service account token: trawl uses no Kubernetes API")
	}
	if system := spec.NodeSelector["kubernetes.io/os"]; system != "linux" {
		t.Errorf("node selector %v: want kubernetes.io/os: linux", spec.NodeSelector)
	}
	if spec.HostNetwork {
		t.Error("host network: the NetworkPolicy would not apply")
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
	if e := c.SecurityContext.AllowPrivilegeEscalation; e == nil || *e {
		t.Error("the container allows privilege escalation")
	}
	if r := c.SecurityContext.ReadOnlyRootFilesystem; r == nil || !*r {
		t.Error("the container's root file system is writable")
	}
	seccomp := c.SecurityContext.SeccompProfile
	if seccomp == nil && spec.SecurityContext != nil {
		seccomp = spec.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp profile %+v, want RuntimeDefault", seccomp)
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

	port := metricsPort(t, c)
	if ann := ds.Spec.Template.Annotations["prometheus.io/port"]; ann != itoa(port.ContainerPort) {
		t.Errorf("prometheus.io/port %q, container port %d", ann, port.ContainerPort)
	}
	served := servedPaths(t)
	for _, probe := range []struct {
		name string
		p    *corev1.Probe
	}{{"startup", c.StartupProbe}, {"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}} {
		name, p := probe.name, probe.p
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		if !slices.Contains(served, p.HTTPGet.Path) || !samePort(p.HTTPGet.Port, port) {
			t.Errorf("%s probe GET %s on port %s: want one of %v on the metrics port", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), served)
		}
	}
	if c.StartupProbe != nil && c.StartupProbe.HTTPGet != nil && c.StartupProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("startup probe GET %s: only /healthz says the probes are attached", c.StartupProbe.HTTPGet.Path)
	}
}

// TestService checks that deploy/daemonset.yaml's Service is headless
// and points at the pods' metrics port.
func TestService(t *testing.T) {
	o := readKubeObjects(t)
	svc, pod := o.svc, o.ds.Spec.Template
	port := metricsPort(t, pod.Spec.Containers[0])
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("cluster IP %q: want a headless Service (None), so that each pod is scraped", svc.Spec.ClusterIP)
	}
	if !selects(svc.Spec.Selector, pod.Labels) || len(svc.Spec.Selector) == 0 {
		t.Errorf("selector %v does not pick the pods, labelled %v", svc.Spec.Selector, pod.Labels)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("ports %v, want the metrics port", svc.Spec.Ports)
	}
	p := svc.Spec.Ports[0]
	if p.Port != port.ContainerPort || !samePort(p.TargetPort, port) || p.Name != port.Name {
		t.Errorf("port %+v, want %s %d to the pods' %d", p, port.Name, port.ContainerPort, port.ContainerPort)
	}
}

// TestNetworkPolicy checks that deploy/daemonset.yaml's NetworkPolicy
// isolates trawl's pods both ways: ingress only to the metrics port,
// from chosen pods, and no egress.
func TestNetworkPolicy(t *testing.T) {
	o := readKubeObjects(t)
	np, pod := o.np, o.ds.Spec.Template
	port := metricsPort(t, pod.Spec.Containers[0])
	if len(np.Spec.PodSelector.MatchExpressions) > 0 || len(np.Spec.PodSelector.MatchLabels) == 0 || !selects(np.Spec.PodSelector.MatchLabels, pod.Labels) {
		t.Errorf("pod selector %v does not pick the pods, labelled %v", np.Spec.PodSelector, pod.Labels)
	}
	types := slices.Sorted(slices.Values(np.Spec.PolicyTypes))
	if !slices.Equal(types, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress}) {
		t.Errorf("policy types %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) > 0 {
		t.Errorf("egress %v: serving metrics needs none", np.Spec.Egress)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Error("no ingress: Prometheus cannot scrape")
	}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || !samePort(*rule.Ports[0].Port, port) ||
			(rule.Ports[0].Protocol != nil && *rule.Ports[0].Protocol != corev1.ProtocolTCP) {
			t.Errorf("ingress to ports %v, want the metrics port, %d/TCP, alone", rule.Ports, port.ContainerPort)
		}
		if len(rule.From) == 0 {
			t.Error("ingress from anywhere: want Prometheus's pods")
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil || peer.NamespaceSelector == nil || peer.PodSelector == nil ||
				len(peer.NamespaceSelector.MatchLabels) == 0 || len(peer.PodSelector.MatchLabels) == 0 {
				t.Errorf("ingress from %+v: want pods chosen by labels in a namespace chosen by labels", peer)
			}
		}
	}
}

// podMonitor is the part of the Prometheus Operator's PodMonitor that
// deploy/podmonitor.yaml uses; decoding it strictly refuses the rest.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// TestPodMonitor checks that deploy/podmonitor.yaml scrapes the metrics
// port of the DaemonSet's pods, at a path trawl serves.
func TestPodMonitor(t *testing.T) {
	o := readKubeObjects(t)
	data, err := os.ReadFile(podMonitorFile)
	if err != nil {
		t.Fatal(err)
	}
	var pm podMonitor
	if err := yaml.UnmarshalStrict(data, &pm); err != nil {
		t.Fatal(err)
	}
	if pm.APIVersion != "monitoring.coreos.com/v1" || pm.Kind != "PodMonitor" || pm.Namespace != o.ns.Name {
		t.Errorf("a %s %s in %q: want a monitoring.coreos.com/v1 PodMonitor in %q", pm.APIVersion, pm.Kind, pm.Namespace, o.ns.Name)
	}
	pod := o.ds.Spec.Template
	if len(pm.Spec.Selector.MatchExpressions) > 0 || len(pm.Spec.Selector.MatchLabels) == 0 || !selects(pm.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("selector %v does not pick the pods, labelled %v", pm.Spec.Selector, pod.Labels)
	}
	port := metricsPort(t, pod.Spec.Containers[0])
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%d endpoints, want the metrics port", len(pm.Spec.PodMetricsEndpoints))
	}
	if e := pm.Spec.PodMetricsEndpoints[0]; e.Port != port.Name || e.Path != "/metrics" {
		t.Errorf("endpoint port %q path %q, want %q /metrics", e.Port, e.Path, port.Name)
	}
}

// metricsPort returns the container's only port, checking it is the one
// its --stats --listen serves.
func metricsPort(t *testing.T, c corev1.Container) corev1.ContainerPort {
	t.Helper()
	listen := ""
	for i, arg := range c.Args {
		if arg == "--listen" && i+1 < len(c.Args) {
			listen = c.Args[i+1]
		}
	}
	if !slices.Contains(c.Args, "--stats") || listen == "" {
		t.Fatalf("args %v: want --stats --listen", c.Args)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name == "" || !strings.HasSuffix(listen, ":"+itoa(c.Ports[0].ContainerPort)) {
		t.Fatalf("ports %v, --listen %s: want one named port, the one trawl listens on", c.Ports, listen)
	}
	return c.Ports[0]
}

// samePort says whether p, a port number or name, is the container port.
func samePort(p intstr.IntOrString, port corev1.ContainerPort) bool {
	if p.Type == intstr.String {
		return p.StrVal == port.Name
	}
	return p.IntVal == port.ContainerPort
}

// selects says whether a selector of labels picks an object labelled so.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// servedPaths returns the paths trawl's --listen server answers GET on
// whatever its flags, from the handler's source.
func servedPaths(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(handlerFile)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range regexp.MustCompile(`"GET (/[^"]*)"`).FindAllStringSubmatch(string(src), -1) {
		if !strings.HasPrefix(m[1], "/debug/") { // only with --pprof
			paths = append(paths, m[1])
		}
	}
	if !slices.Contains(paths, "/metrics") || !slices.Contains(paths, "/healthz") {
		t.Fatalf("%s serves %v: want /metrics and /healthz", handlerFile, paths)
	}
	return paths
}

// changelogVersion returns the version of the newest release in
// CHANGELOG.md, vX.Y.Z: the first its first section names.
func changelogVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(changelogFile)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## ")
	section, _, _ := strings.Cut(rest, "\n## ")
	v := regexp.MustCompile(`\bv[0-9]+\.[0-9]+\.[0-9]+\b`).FindString(section)
	if !ok || v == "" {
		t.Fatalf("%s: no version vX.Y.Z in its newest section", changelogFile)
	}
	return v
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
