// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
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

// readSendArg makes the test binary read the file its argument names,
// then send a UDP datagram to 127.0.0.1:9.
const readSendArg = "__read_send"

// TestEverydayValues traces a command that reads /proc/version and
// sends a datagram to 127.0.0.1: a new thread of it shows as comm[pid],
// the inode whose permission is checked as its number and mode, the
// dentry put as its name and the device loopback_xmit sends on as
// "lo", in JSON beside their members. (A trace of try_to_wake_up, hot
// and called from interrupts too, lost the entries of other calls
// under emulation.)
func TestEverydayValues(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "short forms of everyday structs", "amd64-6.12", "amd64-7.3")
	const file = "/proc/version"
	cmd := trawlCmd("--json", "wake_up_new_task", "inode_permission", "dput", "loopback_xmit", "--", os.Args[0], readSendArg, file)
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	type short struct {
		Short   string `json:"$short"`
		Comm    string `json:"comm"`
		PID     int    `json:"pid"`
		Ino     uint64 `json:"ino"`
		Mode    string `json:"mode"`
		Name    string `json:"name"`
		Ifindex int    `json:"ifindex"`
	}
	seen := map[string]string{}
	for _, c := range parseCalls(t, out) {
		var args struct {
			P, Inode, Dentry, Dev short
		}
		if err := json.Unmarshal(c.Args, &args); err != nil {
			continue
		}
		var ok bool
		switch c.Func {
		case "wake_up_new_task":
			p := args.P
			ok = p.Comm != "" && p.PID > 0 && p.Short == fmt.Sprintf("%s[%d]", p.Comm, p.PID)
		case "inode_permission":
			ok = args.Inode.Ino > 0 && args.Inode.Mode == "S_IFREG|0444" // /proc/version
		case "dput":
			ok = args.Dentry.Short == "version" && args.Dentry.Name == "version"
		case "loopback_xmit":
			ok = args.Dev.Short == "lo" && args.Dev.Name == "lo" && args.Dev.Ifindex == 1
		}
		if ok && seen[c.Func] == "" {
			seen[c.Func] = string(c.Args)
		}
	}
	for _, fn := range []string{"wake_up_new_task", "inode_permission", "dput", "loopback_xmit"} {
		if seen[fn] == "" {
			t.Errorf("no %s call shown as people read it", fn)
		} else {
			t.Logf("%s(%s)", fn, seen[fn])
		}
	}
	if t.Failed() {
		t.Logf("trace:\n%s\nstderr:\n%s", out, stderr)
	}
}
