// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestOutputRefused runs the real command line with -o and --perfetto
// naming what trawl must not write: a symbolic link (left as it is, its
// target untouched), a directory, a FIFO, and a file of another user.
// Each is a usage error, in one line, before anything is traced.
func TestOutputRefused(t *testing.T) {
	guest.HostOnly(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	const content = "keep me\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "created-through-link"), dangling); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte(content), 0o666); err != nil {
		t.Fatal(err)
	}
	otherOwned := os.Lchown(other, 65534, 65534) == nil
	hardlink := filepath.Join(dir, "hardlink")
	if err := os.Link(victim, hardlink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
		skip bool
	}{
		{"symlink", []string{"-o", link}, "is a symbolic link", false},
		{"dangling symlink", []string{"-o", dangling}, "is a symbolic link", false},
		{"perfetto symlink", []string{"--perfetto", link}, "is a symbolic link", false},
		{"directory", []string{"-o", dir}, "is a directory", false},
		{"fifo", []string{"-o", fifo}, "not a regular file", false},
		{"device", []string{"-o", "/dev/zero"}, "not a regular file", false},
		{"another user's file", []string{"-o", other}, "belongs to another user", !otherOwned},
		{"hard link", []string{"-o", hardlink}, "has 2 hard links", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skip("cannot give a file to another user here")
			}
			stdout, stderr, status := runReal(t, append(tc.args, "vfs_read")...)
			if status != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "trawl: ") || !strings.Contains(stderr, tc.want) {
				t.Errorf("status %d, stdout %q, stderr:\n%s\nwant status 2 and one line: ... %s", status, stdout, stderr, tc.want)
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s no longer a symbolic link: %v", link, err)
			}
			for _, path := range []string{victim, other} {
				if b, err := os.ReadFile(path); err != nil || string(b) != content {
					t.Errorf("%s changed: %q, %v", path, b, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, "created-through-link")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a file was created through %s", dangling)
			}
		})
	}
}

// TestOpenOutput checks the open itself, for what is planted after the
// check before tracing: it creates a new file with mode 0600, truncates
// an existing file of trawl's user, opens /dev/null, and refuses a symbolic link, a FIFO
// (without blocking) and a directory, leaving them as they were.
func TestOpenOutput(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	fresh := filepath.Join(dir, "fresh")
	f, err := openOutput(fresh)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new file %v, %v: want mode 0600", fi.Mode(), err)
	}

	existing := filepath.Join(dir, "existing")
	if err := os.WriteFile(existing, []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err = openOutput(existing); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Stat(existing); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("existing file %v, %v: want it empty, mode unchanged", fi, err)
	}

	// /dev/null, the usual sink, is the one device allowed.
	if f, err = openOutput(os.DevNull); err != nil {
		t.Fatal(err)
	}
	if err := (&outputFile{file: f}).Close(); err != nil {
		t.Errorf("writing %s: %v", os.DevNull, err)
	}

	victim := filepath.Join(dir, "victim")
	const content = "keep me\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{link: "is a symbolic link", fifo: "not a regular file", dir: "is a directory"} {
		done := make(chan error, 1)
		go func() {
			f, err := openOutput(path)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("openOutput(%s) = %v, want an error: %s", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("openOutput(%s) blocked", path)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != content {
		t.Errorf("%s changed through the link: %q, %v", victim, b, err)
	}
}

// TestOutputFileErrors checks that an error of writing, syncing or
// closing the output names the file, and is said once.
func TestOutputFileErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	f, err := openOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	out := &outputFile{file: f}
	f.Close()
	if _, err := out.Write([]byte("x")); err == nil || !strings.HasPrefix(err.Error(), "writing "+path+": ") || !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after close: %v, want writing %s: ...", err, path)
	}
	if err := out.Close(); err != nil {
		t.Errorf("Close after a failed write: %v, want nil: the write's error is said", err)
	}
	f, err = openOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	out = &outputFile{file: f}
	f.Close()
	if err := out.Close(); err == nil || !strings.HasPrefix(err.Error(), "writing "+path+": ") {
		t.Errorf("Close after close: %v, want writing %s: ...", err, path)
	}
}

// TestOutputDevNull checks that -o /dev/null, the usual sink, passes the
// checks before tracing (on the host the run then fails at BPF).
func TestOutputDevNull(t *testing.T) {
	guest.HostOnly(t)
	_, stderr, status := runReal(t, "-o", os.DevNull, "vfs_read")
	if status == 2 || strings.Contains(stderr, "refusing") {
		t.Errorf("status %d, stderr:\n%s\nwant /dev/null accepted", status, stderr)
	}
}
