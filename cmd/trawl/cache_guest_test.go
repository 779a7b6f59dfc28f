// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
	"golang.org/x/sys/unix"
)

// cacheLine finds the --debug line that says whether the catalogue
// cache served, and the catalogue's load time.
var (
	cacheLine  = regexp.MustCompile(`msg="catalogue cache (hit|miss|unused)"[^\n]*`)
	stepsLine  = regexp.MustCompile(`msg="catalogue steps[^\n]*`)
	loadedLine = regexp.MustCompile(`msg="catalogue loaded"[^\n]* took=(\S+)`)
)

// cacheRun runs trawl --debug with args and returns its stdout, what it
// said of the cache ("hit", "miss" or "" for nothing), its debug output
// and how long it took to start tracing (a trace) or to end (a list).
func cacheRun(t *testing.T, args ...string) (out, cache, stderr string, took time.Duration) {
	t.Helper()
	start := time.Now()
	cmd := trawlCmd(append([]string{"--debug"}, args...)...)
	if args[0] == "list" {
		var code int
		out, stderr, code = runLimited(t, cmd, startLimit)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		took = time.Since(start)
	} else {
		errOut, done := startTrawl(t, cmd)
		took = waitTracing(t, cmd, errOut).Sub(start)
		if err := waitExit(t, cmd, done, errOut, stopLimit); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		stderr = errOut.String()
	}
	if m := cacheLine.FindStringSubmatch(stderr); m != nil {
		cache = m[1]
	}
	if m := loadedLine.FindStringSubmatch(stderr); m != nil {
		t.Logf("%v: cache %q, catalogue loaded in %s, done in %v\n%s\n%s", args, cache, m[1], took.Round(time.Millisecond), cacheLine.FindString(stderr), stepsLine.FindString(stderr))
	}
	return out, cache, stderr, took
}

// TestCatalogueCache checks that the second start in a boot reads the
// kernel's lists from the cache and finds the same functions, that a
// cache file edited by hand is ignored and written again, and that
// --no-cache reads the kernel.
func TestCatalogueCache(t *testing.T) {
	guest.Only(t, "the catalogue cache", "amd64-7.3")
	if err := trawl.ClearCatalogueCache(""); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(trawl.DefaultCatalogueCache, "catalogue")
	trace := []string{"--stats", "-d", "1", "vfs_read"}

	_, cache, stderr, first := cacheRun(t, trace...)
	if cache != "miss" || !strings.Contains(stderr, "catalogue cache written") {
		t.Fatalf("first trace: cache %q, want a miss and the cache written\n%s", cache, stderr)
	}
	_, cache, stderr, second := cacheRun(t, trace...)
	if cache != "hit" || !strings.Contains(stderr, "tracing 1 functions") {
		t.Fatalf("second trace: cache %q, want a hit, tracing vfs_read\n%s", cache, stderr)
	}
	t.Logf("start to tracing: %v without the cache, %v with it", first.Round(time.Millisecond), second.Round(time.Millisecond))

	list := []string{"list", "vfs_*", "tcp_send*"}
	before, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	want, cache, _, _ := cacheRun(t, append(list, "--no-cache")...)
	if cache != "" || want == "" {
		t.Fatalf("--no-cache: cache %q, %d bytes listed", cache, len(want))
	}
	if after, err := os.Stat(file); err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("--no-cache wrote the cache file: %v", err)
	}
	if got, cache, _, _ := cacheRun(t, list...); cache != "hit" || got != want {
		t.Errorf("list from the cache: cache %q, same functions %v", cache, got == want)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), " vfs_read\n")
	if at < 0 {
		t.Fatal("the cache file has no vfs_read line of kallsyms")
	}
	copy(data[at:], " vfs_reed\n")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, cache, stderr, _ := cacheRun(t, list...)
	if cache != "miss" || !strings.Contains(stderr, "checksum") || !strings.Contains(stderr, "catalogue cache written") || got != want {
		t.Errorf("edited cache file: cache %q, same functions %v, want a miss for its checksum and the file written again\n%s", cache, got == want, stderr)
	}
	if got, cache, _, _ := cacheRun(t, list...); cache != "hit" || got != want {
		t.Errorf("after the edited file was written again: cache %q, same functions %v", cache, got == want)
	}
}

// TestCatalogueCacheModule loads a module between two starts in a boot:
// the second start sees the cache is stale, reads the kernel's lists
// again and finds the module's functions.
func TestCatalogueCacheModule(t *testing.T) {
	guest.Only(t, "the catalogue cache after a module is loaded", "amd64-7.3")
	f, err := os.Open(guest.SpareModule)
	if err != nil {
		t.Skipf("no spare module to load: %v", err)
	}
	defer f.Close()
	if _, err := os.Stat("/sys/module/dummy"); err == nil {
		t.Skip("the dummy module is loaded already")
	}
	if _, cache, stderr, _ := cacheRun(t, "list", "vfs_read"); cache == "" {
		t.Fatalf("no word of the cache\n%s", stderr)
	}
	if _, stderr, code := runLimited(t, trawlCmd("--debug", "list", "dummy:*"), startLimit); code == 0 || !strings.Contains(stderr, "catalogue cache hit") {
		t.Fatalf("dummy:* before the module is loaded: exit %d, want a failure from a cache hit\n%s", code, stderr)
	}
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil {
		t.Fatalf("load %s: %v", guest.SpareModule, err)
	}
	defer func() {
		if err := unix.DeleteModule("dummy", unix.O_NONBLOCK); err != nil {
			t.Errorf("unload dummy: %v", err)
		}
	}()
	out, cache, stderr, _ := cacheRun(t, "list", "dummy:*")
	if cache != "miss" || !strings.Contains(out, " [dummy]") {
		t.Errorf("dummy:* after the module is loaded: cache %q, want a miss and the module's functions\n%s\n%s", cache, out, stderr)
	}
}
