// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// whoamiArg as the first argument makes the test binary print who it
// runs as, for the tests of -u.
const whoamiArg = "__whoami"

func whoami() {
	groups, _ := os.Getgroups()
	fmt.Printf("uid=%d gid=%d groups=%v HOME=%s USER=%s LOGNAME=%s\n",
		os.Getuid(), os.Getgid(), groups, os.Getenv("HOME"), os.Getenv("USER"), os.Getenv("LOGNAME"))
}

// TestLookupUser checks -u's USER: a name or a numeric id of
// /etc/passwd, a numeric UID[:GID] of no one, and a name of no one.
func TestLookupUser(t *testing.T) {
	for spec, want := range map[string]string{
		"4242":      "4242:4242: HOME=/ USER=4242",
		"4242:4343": "4242:4343: HOME=/ USER=4242",
	} {
		c, err := lookupUser(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := fmt.Sprintf("%s HOME=%s USER=%s", c.arg(), c.home, c.name); got != want {
			t.Errorf("%s: %s, want %s", spec, got, want)
		}
	}
	for _, spec := range []string{"trawl-no-such-user", "4242:staff", "", "-1"} {
		if _, err := lookupUser(spec); err == nil {
			t.Errorf("%q: no error", spec)
		}
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	for _, spec := range []string{"nobody", u.Uid} {
		c, err := lookupUser(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if fmt.Sprint(c.uid) != u.Uid || fmt.Sprint(c.gid) != u.Gid || c.name != "nobody" || c.home != u.HomeDir {
			t.Errorf("%s: %+v, want nobody's %s:%s %s", spec, c, u.Uid, u.Gid, u.HomeDir)
		}
	}
	env := (&credential{name: "nobody", home: "/nonexistent"}).environ([]string{"PATH=/bin", "HOME=/root", "USER=root", "LOGNAME=root", "HOMEX=1"})
	if got, want := strings.Join(env, " "), "PATH=/bin HOMEX=1 HOME=/nonexistent USER=nobody LOGNAME=nobody"; got != want {
		t.Errorf("environ: %s, want %s", got, want)
	}
}

// TestUserBadInput checks that -u with an unknown user, or without a
// command, is a usage error before anything is traced.
func TestUserBadInput(t *testing.T) {
	guest.HostOnly(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-u", "trawl-no-such-user", "vfs_read", "--", "true"}, "-u trawl-no-such-user: no user named trawl-no-such-user"},
		{[]string{"--user", "4242:staff", "vfs_read", "--", "true"}, "not a numeric GID"},
		{[]string{"-u", "nobody", "vfs_read"}, "-u needs a command"},
	} {
		stdout, stderr, status := runReal(t, tc.args...)
		if status != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: status %d, stdout %q, stderr:\n%s\nwant status 2, one line: ... %s", tc.args, status, stdout, stderr, tc.want)
		}
	}
}

// TestGateUser runs a command through the gate as a user of no name,
// as -u does: its uid, gid, groups and environment are that user's.
// The gate drops root's privileges itself, so it needs root: trawl's.
func TestGateUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// The command is a copy of the test binary the user can run.
	dir := t.TempDir()
	// t.TempDir's directories are the test's own, made 0700.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s not searchable by others", d)
		}
	}
	exe := filepath.Join(dir, "whoami")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(roleEnv, "trawl") // the gate is trawl's main
	cases := map[string]string{
		"4242:4343": "uid=4242 gid=4343 groups=[] HOME=/ USER=4242 LOGNAME=4242\n",
	}
	if u, err := user.Lookup("nobody"); err == nil {
		cases["nobody"] = "uid=" + u.Uid + " gid=" + u.Gid + " groups=[] HOME=" + u.HomeDir + " USER=nobody LOGNAME=nobody\n"
	}
	for spec, want := range cases {
		cred, err := lookupUser(spec)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		g, err := startGated([]string{exe, whoamiArg}, cred, &out, &errOut)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.release(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-g.exited:
		case <-time.After(time.Minute):
			g.kill()
			t.Fatal("the command did not exit")
		}
		if err := g.status(); err != nil {
			t.Fatalf("%s: status %v; stderr:\n%s", spec, err, errOut.String())
		}
		if got := out.String(); got != want {
			t.Errorf("-u %s: the command runs as\n%s\nwant\n%s", spec, got, want)
		}
	}
}
