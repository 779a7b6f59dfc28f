// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"6.12.9+deb12", "6.12.10+deb12", true},
		{"6.12.117+deb12", "6.12.115+deb12", false},
		{"6.1.0-9", "6.1.0-56", true},
		{"7.3.4+deb13", "7.3.4+deb13", false},
	} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%q, %q) = %v, want %v", c.a, c.b, got, c.less)
		}
	}
}

func TestModuleName(t *testing.T) {
	for file, want := range map[string]string{
		"9pnet_virtio.ko.xz":  "9pnet_virtio",
		"virtio-rng.ko":       "virtio_rng",
		"netfs.ko.zst":        "netfs",
		"modules.builtin.bin": "",
	} {
		got, ok := moduleName(file)
		if got != want || ok != (want != "") {
			t.Errorf("moduleName(%q) = %q, %v; want %q", file, got, ok, want)
		}
	}
}

func TestFindMarker(t *testing.T) {
	log := []byte("[    1.0] booting\r\n" + guest.ExitMarker + "3\r\n[    2.0] reboot: Power down\n")
	if code, ok := findMarker(log); !ok || code != 3 {
		t.Fatalf("findMarker = %d, %v; want 3, true", code, ok)
	}
	if _, ok := findMarker([]byte("Kernel panic - not syncing\n")); ok {
		t.Fatal("findMarker found a status in a log without one")
	}
}

func TestRunArchive(t *testing.T) {
	spec := guest.Spec{Args: []string{"/run/vmtest/bin/x.test", "-test.v"}, Dir: "/src"}
	data, err := runArchive(spec, []byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data)%512 != 0 {
		t.Fatalf("archive is %d bytes, not a multiple of 512", len(data))
	}
	r := cpio.NewReader(bytes.NewReader(data))
	got := map[string]string{}
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r)
		got[h.Name] = string(body)
	}
	for _, dir := range []string{"run", "run/vmtest", "run/vmtest/bin"} {
		if _, ok := got[dir]; !ok {
			t.Errorf("archive lacks directory %s", dir)
		}
	}
	if got["run/vmtest/bin/x.test"] != "binary" {
		t.Errorf("archive lacks the binary")
	}
	if !strings.Contains(got[guest.SpecPath[1:]], `"dir":"/src"`) {
		t.Errorf("spec is %q", got[guest.SpecPath[1:]])
	}
}

// guestFor returns run options for a real guest of the host's arch, or
// skips when the test bed is not set up (make tools fetch sets it up).
func guestFor(t *testing.T, args ...string) Options {
	t.Helper()
	k, err := LookupKernel(runtime.GOARCH + "-6.12")
	if err != nil {
		t.Skipf("no test bed kernel for %s", runtime.GOARCH)
	}
	cache := os.Getenv("TRAWL_CACHE")
	if cache == "" {
		dir, _ := os.UserCacheDir()
		cache = filepath.Join(dir, "trawl")
	}
	init, _ := filepath.Abs("../../bin/guestinit-" + runtime.GOARCH)
	if _, err := os.Stat(filepath.Join(cache, "kernels", k.ID, "kernel.json")); err != nil {
		t.Skip("the test bed is not set up here: run `make tools fetch` first")
	}
	if _, err := os.Stat(init); err != nil {
		t.Skip("the test bed is not set up here: run `make tools fetch` first")
	}
	return Options{Cache: cache, Kernel: k, Init: init, Args: args, Timeout: 4 * time.Minute,
		Memory: 512, CPUs: 1, Stdout: io.Discard, Stderr: io.Discard, Console: io.Discard}
}

// buildHelper builds a static Go program from source for the guest.
func buildHelper(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", "prog", "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v\n%s", err, out)
	}
	return filepath.Join(dir, "prog")
}

func TestRunStatuses(t *testing.T) {
	if testing.Short() {
		t.Skip("boots guests")
	}
	if guest.Kernel() != "" {
		t.Skip("boots guests itself: runs on the host")
	}
	prog := buildHelper(t, `package main
import ("fmt"; "os"; "time")
func main() {
	switch os.Args[1] {
	case "exit":
		shared, _ := os.ReadFile(os.Args[2] + "/shared")
		werr := os.WriteFile(os.Args[2]+"/new", nil, 0o644)
		fmt.Println("out:", os.Getenv("TRAWL_VMTEST_KERNEL"), string(shared), "read-only:", werr != nil)
		fmt.Fprintln(os.Stderr, "err")
		os.Exit(7)
	case "sleep": time.Sleep(time.Hour)
	case "panic": os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0)
	}
}`)
	for _, c := range []struct {
		arg     string
		timeout time.Duration
		want    int
	}{
		// Time enough to boot on a busy host: a bound on a hang only.
		{"exit", 4 * time.Minute, 7},
		{"sleep", 10 * time.Second, ExitTimeout},
		{"panic", 4 * time.Minute, ExitPanic},
	} {
		t.Run(c.arg, func(t *testing.T) {
			ro := t.TempDir()
			if err := os.WriteFile(filepath.Join(ro, "shared"), []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
			o := guestFor(t, prog, c.arg, ro)
			o.ReadOnly = []string{ro}
			o.Timeout = c.timeout
			var out, errOut, console bytes.Buffer
			o.Stdout, o.Stderr, o.Console = &out, &errOut, &console
			code, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if code != c.want {
				t.Fatalf("status %d, want %d; console:\n%s", code, c.want, console.String())
			}
			if c.arg == "exit" && (out.String() != "out: "+o.Kernel.ID+" hello read-only: true\n" || errOut.String() != "err\n") {
				t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
			}
			if !strings.Contains(console.String(), "--- guest console") {
				t.Fatalf("a failed run did not show the console")
			}
		})
	}
}

func TestBpftraceCommand(t *testing.T) {
	cmd, err := guest.BpftraceCommand("/c/bpftrace/arm64/root", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/c/bpftrace/arm64/root/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
		"--library-path", "/c/bpftrace/arm64/root/lib/aarch64-linux-gnu:/c/bpftrace/arm64/root/usr/lib/aarch64-linux-gnu",
		"/c/bpftrace/arm64/root/usr/bin/bpftrace",
	}
	if strings.Join(cmd, " ") != strings.Join(want, " ") {
		t.Errorf("BpftraceCommand = %q, want %q", cmd, want)
	}
	if _, err := guest.BpftraceCommand("/c", "riscv64"); err == nil {
		t.Error("BpftraceCommand accepted an arch the test bed does not have")
	}
}
