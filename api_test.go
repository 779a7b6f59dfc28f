// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// goTool returns the go command, or skips the test without one (the test
// bed guests have none).
func goTool(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	return gobin
}

// TestEmbedder builds testdata/embedder, a module of its own that traces,
// reads calls, switches on value kinds and renders JSON through the public
// API. Go refuses to build a module that imports another's internal
// packages, so this also shows the public API is enough.
func TestEmbedder(t *testing.T) {
	cmd := exec.Command(goTool(t), "build", "-o", filepath.Join(t.TempDir(), "embedder"), ".")
	cmd.Dir = filepath.Join("testdata", "embedder")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", cmd.Dir, err, out)
	}
}

// internalName matches a name of an internal package in Go code, as
// "session.Config".
var internalName = regexp.MustCompile(`\b(backend|bpf|decode|event|features|filter|kernel|plan|selector|session|skip)\.[A-Z]\w*`)

// TestDocShowsNoInternalType checks that the documentation of package
// trawl names no type or value of an internal package.
func TestDocShowsNoInternalType(t *testing.T) {
	out, err := exec.Command(goTool(t), "doc", "-all", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go doc: %v\n%s", err, out)
	}
	for _, m := range internalName.FindAll(out, -1) {
		t.Errorf("go doc shows %s", m)
	}
}
