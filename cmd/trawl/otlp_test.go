// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestInsecureWarning checks that trawl warns, in one line on stderr
// before anything is traced, when --otlp sends the trace in the clear to
// another machine, and only then.
func TestInsecureWarning(t *testing.T) {
	guest.HostOnly(t)
	const warning = "trawl: warning: --otlp "
	for u, want := range map[string]bool{
		"http://10.0.0.1:4318":   true,
		"grpc://10.0.0.1:4317":   true,
		"http://127.0.0.1:4318":  false,
		"grpc://localhost:4317":  false,
		"http://[::1]:4318":      false,
		"https://10.0.0.1:4318":  false,
		"grpcs://10.0.0.1:4317":  false,
		"https://127.0.0.1:4318": false,
	} {
		var b bytes.Buffer
		warnInsecure(context.Background(), &b, u)
		if got := strings.HasPrefix(b.String(), warning+u+" sends the trace unencrypted"); got != want || strings.Count(b.String(), "\n") > 1 {
			t.Errorf("%s: warned %q, want a warning: %v", u, b.String(), want)
		}
	}
	// Through the command line: the command, not found, ends the run
	// after the warning and before the trace.
	for u, want := range map[string]bool{"http://10.0.0.1:4318": true, "http://127.0.0.1:4318": false, "https://10.0.0.1:4318": false} {
		_, stderr, status := runReal(t, "--otlp", u, "vfs_read", "--", "/nonexistent/trawl-no-such-command")
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		warned := len(lines) == 2 && strings.HasPrefix(lines[0], warning+u)
		if status != exitNotFound || warned != want || !want && len(lines) != 1 {
			t.Errorf("--otlp %s: status %d, stderr:\n%s\nwant %d, a warning line first: %v", u, status, stderr, exitNotFound, want)
		}
	}
	// -q drops it, as every notice.
	if _, stderr, _ := runReal(t, "-q", "--otlp", "http://10.0.0.1:4318", "vfs_read", "--", "/nonexistent/trawl-no-such-command"); strings.Contains(stderr, warning) {
		t.Errorf("-q: %s", stderr)
	}
}
