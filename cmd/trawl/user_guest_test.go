// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestUser traces a command run with -u: it runs as that user, with its
// groups and environment, while trawl stays root. The guest has no
// /etc/passwd: the user is numeric there, and by name too where there
// is one.
func TestUser(t *testing.T) {
	guest.Require(t)
	cases := map[string]string{
		"65534:65534": "uid=65534 gid=65534 groups=[] HOME=/ USER=65534 LOGNAME=65534\n",
	}
	if u, err := user.Lookup("nobody"); err == nil {
		cases["nobody"] = "uid=" + u.Uid + " gid=" + u.Gid + " groups=[] HOME=" + u.HomeDir + " USER=nobody LOGNAME=nobody\n"
	} else {
		t.Logf("no user nobody: %v", err)
	}
	for spec, want := range cases {
		t.Run(spec, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "trace")
			cmd := trawlCmd("-u", spec, "-o", out, hotFunc, "--", os.Args[0], whoamiArg)
			stdout, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			if stdout != want {
				t.Errorf("the command runs as\n%s\nwant\n%s", stdout, want)
			}
			if !strings.Contains(stderr, "stopping: command exited") {
				t.Errorf("stderr:\n%s", stderr)
			}
		})
	}
}
