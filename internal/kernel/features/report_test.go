// SPDX-License-Identifier: Apache-2.0

package features

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

func TestReportRendering(t *testing.T) {
	r := Report{
		{Feature{Name: "a", Since: "5.5"}, nil},
		{Feature{Name: "b", Since: "7.0"}, fmt.Errorf("kernel has no B: %w", ebpf.ErrNotSupported)},
		{Feature{Name: "c", Since: "7.2"}, errors.New("permission denied")},
	}
	if got, want := r.Markdown("amd64-7.3"), "| amd64-7.3 | yes | no | error |"; got != want {
		t.Errorf("Markdown = %q, want %q", got, want)
	}
	want := "a               yes\n" +
		"b               no: kernel has no B: not supported\n" +
		"c               probe failed: permission denied\n"
	if got := r.String(); got != want {
		t.Errorf("String =\n%s\nwant\n%s", got, want)
	}
	if !r[0].Supported() || r[1].Supported() || r[2].Supported() {
		t.Error("Supported disagrees with Err")
	}
}

func TestMarkdownHeader(t *testing.T) {
	lines := strings.Split(MarkdownHeader(), "\n")
	if len(lines) != 2 {
		t.Fatalf("header has %d lines, want 2", len(lines))
	}
	for i, line := range lines {
		if n := strings.Count(line, "|"); n != len(All)+2 {
			t.Errorf("header line %d has %d cell borders, want %d", i, n, len(All)+2)
		}
	}
}
