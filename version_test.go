// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestVersionBPF checks that Version hashes the BPF object committed for
// this architecture, and names the running Go and platform.
func TestVersionBPF(t *testing.T) {
	obj := map[string]string{"amd64": "capture_x86_bpfel.o", "arm64": "capture_arm64_bpfel.o"}[runtime.GOARCH]
	if obj == "" {
		t.Skipf("no BPF object for %s", runtime.GOARCH)
	}
	data, err := os.ReadFile(filepath.Join("internal", "bpf", obj))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	v := Version()
	if want := hex.EncodeToString(sum[:]); v.BPF != want {
		t.Errorf("BPF = %s, want the hash of %s, %s", v.BPF, obj, want)
	}
	if v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("GoVersion, Platform = %s, %s, want %s, %s/%s", v.GoVersion, v.Platform, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
}

func TestVersionFrom(t *testing.T) {
	settings := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "e9895e4690ae5b8f4b4f7fa0e7caa3ba0ecd348b"},
		{Key: "vcs.time", Value: "2026-11-23T00:05:33Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	commitTime := time.Date(2026, 11, 23, 0, 5, 33, 0, time.UTC)
	app := debug.Module{Path: "example.com/app", Version: "v3.0.0"}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		version  string
		commit   bool // want Commit, CommitTime and Modified from settings
	}{
		{name: "no build info", version: "(devel)"},
		{name: "trawl, -buildvcs=false",
			bi:      &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}},
			version: "(devel)"},
		{name: "trawl from a checkout",
			bi:      &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261123000533-e9895e4690ae+dirty"}, Settings: settings},
			version: "v0.0.0-20261123000533-e9895e4690ae+dirty", commit: true},
		{name: "go install trawl@v1.2.0",
			bi:      &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.0"}},
			version: "v1.2.0"},
		{name: "embedded: the app's commit is not trawl's",
			bi:      &debug.BuildInfo{Main: app, Deps: []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.49.0"}, {Path: modulePath, Version: "v1.3.0"}}, Settings: settings},
			version: "v1.3.0"},
		{name: "embedded, replaced by a fork",
			bi:      &debug.BuildInfo{Main: app, Deps: []*debug.Module{{Path: modulePath, Version: "v1.3.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.3.1"}}}},
			version: "v1.3.1"},
		{name: "embedded, replaced by a directory",
			bi:      &debug.BuildInfo{Main: app, Deps: []*debug.Module{{Path: modulePath, Version: "v1.3.0", Replace: &debug.Module{Path: "../trawl"}}}},
			version: "(devel)"},
		{name: "set at link time",
			bi:       &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: settings},
			override: "v1.4.0", version: "v1.4.0", commit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := versionFrom(tc.bi, tc.override, "00ff")
			if v.Version != tc.version {
				t.Errorf("Version = %q, want %q", v.Version, tc.version)
			}
			want := VersionInfo{}
			if tc.commit {
				want = VersionInfo{Commit: settings[0].Value, CommitTime: commitTime, Modified: true}
			}
			if v.Commit != want.Commit || !v.CommitTime.Equal(want.CommitTime) || v.Modified != want.Modified {
				t.Errorf("Commit, CommitTime, Modified = %q, %v, %v, want %q, %v, %v",
					v.Commit, v.CommitTime, v.Modified, want.Commit, want.CommitTime, want.Modified)
			}
			if v.BPF != "00ff" {
				t.Errorf("BPF = %q, want the hash given", v.BPF)
			}
		})
	}
}

func TestVersionString(t *testing.T) {
	v := VersionInfo{
		Version:    "v1.2.0",
		Commit:     "e9895e4690ae5b8f4b4f7fa0e7caa3ba0ecd348b",
		CommitTime: time.Date(2026, 11, 23, 0, 5, 33, 0, time.UTC),
		Modified:   true,
		GoVersion:  "go1.26.0",
		Platform:   "linux/arm64",
		BPF:        "00ff",
	}
	want := "trawl v1.2.0\ncommit e9895e4690ae5b8f4b4f7fa0e7caa3ba0ecd348b (2026-11-23T00:05:33Z, modified)\ngo1.26.0 linux/arm64\nbpf sha256:00ff"
	if got := v.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	v = VersionInfo{Version: "v1.2.0", GoVersion: "go1.26.0", Platform: "linux/amd64", BPF: "00ff"}
	want = "trawl v1.2.0\ngo1.26.0 linux/amd64\nbpf sha256:00ff"
	if got := v.String(); got != want {
		t.Errorf("String() without a commit =\n%s\nwant\n%s", got, want)
	}
}

// TestVersionLinkTime builds this package's tests again with the version
// set at link time, as the doc comment of version says, and checks that
// Version reports it.
func TestVersionLinkTime(t *testing.T) {
	const env = "TRAWL_TEST_LINK_VERSION"
	if want := os.Getenv(env); want != "" {
		if got := Version().Version; got != want {
			t.Fatalf("Version().Version = %q, want %q set at link time", got, want)
		}
		return
	}
	if testing.Short() {
		t.Skip("builds the tests again; not in -short mode")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		t.Skipf("needs the go command to build the tests again: %v", err)
	}
	cmd := exec.Command(goTool, "test", "-count=1",
		"-run=^TestVersionLinkTime$", "-ldflags=-X "+modulePath+".version=v9.8.7", ".")
	cmd.Env = append(os.Environ(), env+"=v9.8.7")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}
