// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// readsArg makes the test binary read each file its arguments name.
const readsArg = "__reads"

// reads reads each file of paths, ignoring errors.
func reads(paths []string) {
	for _, p := range paths {
		os.ReadFile(p)
	}
}

// TestReadableValues traces a command that fails to open
// /proc/version/x, then reads /proc/version: do_filp_open (do_file_open
// from 7.1) shows its struct filename's name, a char * member, as the
// string, and vfs_read its struct file as its path, across the mount of
// /proc.
func TestReadableValues(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "strings and paths behind struct members", "amd64-6.12", "amd64-7.3")
	const missing, file = "/proc/version/x", "/proc/version"
	cmd := trawlCmd("-q", "--json", "do_fil*_open", "vfs_read", "--", os.Args[0], readsArg, missing, file)
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	t.Logf("trace:\n%s", out)
	var name, path bool
	for _, c := range parseCalls(t, out) {
		var args struct {
			Pathname struct {
				Name json.RawMessage `json:"name"`
			} `json:"pathname"`
			File struct {
				Path string `json:"path"`
			} `json:"file"`
		}
		if err := json.Unmarshal(c.Args, &args); err != nil {
			continue // not a struct: another call
		}
		switch c.Func {
		case "do_filp_open", "do_file_open":
			name = name || string(args.Pathname.Name) == `"`+missing+`"`
		case "vfs_read":
			path = path || args.File.Path == file
		}
	}
	if !name {
		t.Errorf("no do_filp_open or do_file_open call with pathname->name %q", missing)
	}
	if !path {
		t.Errorf("no vfs_read call with file->path %q", file)
	}
}
