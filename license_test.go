// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// generated matches the line Go's convention puts in generated files,
// which their generator rewrites without an SPDX line.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// bpfDirs hold BPF C sources, under GPL-2.0.
var bpfDirs = map[string]bool{"internal/bpf": true, "cmd/trawl-bench/floor": true}

// TestSPDX checks that every source file in the repository (Go, C, shell
// scripts, Makefiles) names its license at its top, as the README's
// License section says: GPL-2.0 for the BPF C in internal/bpf and
// cmd/trawl-bench/floor, Apache-2.0 for everything else.
func TestSPDX(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("listing the repository's files needs git: %v", err)
	}
	checked := 0
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		head, err := readHead(name)
		if err != nil {
			t.Fatal(err)
		}
		switch ext := path.Ext(name); {
		case head == nil, ext == ".go" && generated.Match(head):
			continue
		case ext == ".go" || ext == ".c" || ext == ".h" || ext == ".sh" ||
			path.Base(name) == "Makefile" || bytes.HasPrefix(head, []byte("#!")):
		default:
			continue
		}
		checked++
		want := "Apache-2.0"
		if bpfDirs[path.Dir(name)] && (path.Ext(name) == ".c" || path.Ext(name) == ".h") {
			want = "GPL-2.0"
		}
		if !bytes.Contains(head, []byte("SPDX-License-Identifier: "+want+"\n")) &&
			!bytes.Contains(head, []byte("SPDX-License-Identifier: "+want+" */\n")) {
			t.Errorf("%s: no SPDX-License-Identifier: %s line at its top", name, want)
		}
	}
	if checked == 0 {
		t.Fatal("found no source file to check")
	}
}

// readHead returns the first bytes of the file name, nil for a file git
// lists that is gone from the work tree.
func readHead(name string) ([]byte, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Enough for an SPDX line, or for the "Code generated" line below a
	// license header that protoc copies from a .proto file.
	head := make([]byte, 2048)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return head[:n], nil
}
