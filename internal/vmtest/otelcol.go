// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// otelcolSource is the source of the test bed's OpenTelemetry Collector:
// a main package and the go.mod and go.sum that pin the upstream
// collector modules it is built from (OTLP receiver and file exporter,
// collector v0.161.0, contrib v0.161.0), kept as .txt files so that they
// stay out of trawl's module.
//
//go:embed otelcol/*.txt
var otelcolSource embed.FS

// FetchOtelcol builds the test bed's OpenTelemetry Collector for arch,
// statically, with the go command (the modules come through the Go module
// proxy), into cache, and returns the binary's path, or the one built
// there before from the same source. The OTLP export tests run it in
// guests (guest.Otelcol).
func FetchOtelcol(ctx context.Context, cache, arch string) (string, error) {
	files := map[string][]byte{}
	sum := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := otelcolSource.ReadFile("otelcol/" + name + ".txt")
		if err != nil {
			return "", err
		}
		files[name] = b
		fmt.Fprintf(sum, "%s %d\n", name, len(b))
		sum.Write(b)
	}
	dir := filepath.Join(cache, "otelcol", hex.EncodeToString(sum.Sum(nil))[:16])
	bin := filepath.Join(dir, arch, "otelcol")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// A lock of its own: the build takes minutes, which the guests that
	// need no collector should not wait for.
	unlock, err := lockCache(filepath.Join(cache, "otelcol"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	slog.Info("building the OpenTelemetry Collector for the guests (the first build downloads its modules: minutes)", "arch", arch)
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return "", err
		}
	}
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-mod=readonly", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(withoutGoEnv(os.Environ()), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the OpenTelemetry Collector for %s: %w\n%s", arch, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// withoutGoEnv drops the variables that would steer the collector's build
// away from its own module and target.
func withoutGoEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS", "GOWORK":
			continue
		}
		out = append(out, kv)
	}
	return out
}
