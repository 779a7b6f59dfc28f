// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// modulePath is trawl's module path, by which Version finds trawl among
// the modules of a program that embeds it.
const modulePath = "github.com/trawl-dev/trawl"

// version overrides the module version Version reports when set at link
// time, for builds where Go cannot know it (from a source tarball, or with
// -buildvcs=false):
//
//	go build -ldflags '-X github.com/trawl-dev/trawl.version=v1.2.0' ./cmd/trawl
var version string

// VersionInfo identifies a build of trawl.
type VersionInfo struct {
	// Version is trawl's module version: a release tag such as v1.2.0,
	// a Go pseudo-version for an untagged commit
	// (v0.0.0-20261123000533-e9895e4690ae, "+dirty" with uncommitted
	// changes), or "(devel)" when the build recorded none.
	Version string
	// Commit is the full hash of the commit built, "" when the build did not
	// record it (go install and programs embedding trawl build from module
	// sources, whose Version names the commit).
	Commit string
	// CommitTime is the commit's time, zero when Commit is "".
	CommitTime time.Time
	// Modified reports that the work tree had uncommitted changes.
	Modified bool
	// GoVersion is the Go release that built the program, e.g. go1.26.0.
	GoVersion string
	// Platform is the operating system and architecture, e.g. linux/amd64.
	Platform string
	// BPF is the SHA-256, in hex, of the compiled capture program this
	// build embeds and loads (internal/bpf's object for its architecture).
	BPF string
}

// Version reports which trawl this is: its module version, commit, Go
// release and the hash of its BPF program. In a program that embeds trawl
// it reports the trawl module that program was built with.
func Version() VersionInfo {
	bi, _ := debug.ReadBuildInfo()
	sum := sha256.Sum256(bpf.CaptureObject())
	return versionFrom(bi, version, hex.EncodeToString(sum[:]))
}

// versionFrom makes the VersionInfo of build info bi (nil when the program
// has none), a link-time override (or "") and the BPF object's hash.
func versionFrom(bi *debug.BuildInfo, override, bpfSum string) VersionInfo {
	v := VersionInfo{
		Version:   "(devel)",
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		BPF:       bpfSum,
	}
	if bi != nil {
		if mod := trawlModule(bi); mod != nil {
			v.Version = cmp.Or(mod.Version, v.Version)
		}
		// Go records the commit of the main module only.
		if bi.Main.Path == modulePath {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					v.Commit = s.Value
				case "vcs.time":
					v.CommitTime, _ = time.Parse(time.RFC3339, s.Value)
				case "vcs.modified":
					v.Modified = s.Value == "true"
				}
			}
		}
	}
	v.Version = cmp.Or(override, v.Version)
	return v
}

// trawlModule finds trawl in bi: the main module, or the dependency (as
// replaced, if it is) of a program that embeds trawl; nil if neither.
func trawlModule(bi *debug.BuildInfo) *debug.Module {
	mod := &bi.Main
	if mod.Path != modulePath {
		i := slices.IndexFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == modulePath })
		if i < 0 {
			return nil
		}
		mod = bi.Deps[i]
	}
	if mod.Replace != nil {
		return mod.Replace
	}
	return mod
}

// String gives v in four lines (no final newline), as trawl --version
// prints it:
//
//	trawl v1.2.0
//	commit 0123abcd... (2026-11-23T00:05:33Z)
//	go1.26.0 linux/amd64
//	bpf sha256:89ab...
//
// The commit line is left out when the build did not record it.
func (v VersionInfo) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trawl %s\n", v.Version)
	if v.Commit != "" {
		var notes []string
		if !v.CommitTime.IsZero() {
			notes = append(notes, v.CommitTime.UTC().Format(time.RFC3339))
		}
		if v.Modified {
			notes = append(notes, "modified")
		}
		fmt.Fprintf(&b, "commit %s", v.Commit)
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%s %s\n", v.GoVersion, v.Platform)
	fmt.Fprintf(&b, "bpf sha256:%s", v.BPF)
	return b.String()
}
