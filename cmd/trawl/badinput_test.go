// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestBadInput runs the real command line with input it must refuse
// before opening, loading or writing anything: one line of error on
// stderr, nothing on stdout, the usage status 2 (or 1 for what is not a
// usage mistake), and files named by -o or --perfetto left untouched.
func TestBadInput(t *testing.T) {
	guest.HostOnly(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	const content = "keep me\n"
	if err := os.WriteFile(existing, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh")
	// A pid that is surely free: beyond every live one, within pid_max.
	free := strconv.FormatInt(pidMax(), 10)
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"pid zero", []string{"-p", "0", "vfs_read"}, 2, "process id 0 out of range"},
		{"tracepoint as an entry", []string{"--entry", "tp:sched:*", "vfs_read"}, 2, "a tracepoint's event is no call"},
		{"stack value unknown", []string{"--stack=users", "vfs_read"}, 2, "want kernel, user or both"},
		{"stack value after a space", []string{"--stack", "user", "vfs_read"}, 2, "--stack takes its value after an equals sign: --stack=user"},
		{"pid negative", []string{"-p", "-5", "vfs_read"}, 2, "process id -5 out of range"},
		{"pid wraps uint32", []string{"-p", "4294967297", "vfs_read"}, 2, "out of range"},
		{"pid not a number", []string{"-p", "init", "vfs_read"}, 2, `not a process id: "init"`},
		{"pid not running", []string{"-p", free, "vfs_read"}, 2, "no such process"},
		{"pid list with a bad one", []string{"-p", "1,init", "vfs_read"}, 2, `not a process id: "init"`},
		{"pid list with a hole", []string{"-p", "1,,2", "vfs_read"}, 2, `not a process id: ""`},
		{"pid list with one not running", []string{"-p", "1," + free, "vfs_read"}, 2, "no such process"},
		{"pid and command", []string{"-p", "1", "vfs_read", "--", "true"}, 2, "-p and a command"},
		{"duration zero", []string{"--duration", "0s", "vfs_read"}, 2, "--duration must be positive"},
		{"duration zero seconds", []string{"-d", "0", "vfs_read"}, 2, "--duration must be positive"},
		{"duration not a number", []string{"-d", "5x", "vfs_read"}, 2, "want a duration such as 10s, 1m30s or 500ms, or a number of seconds"},
		{"duration negative", []string{"--duration", "-1s", "vfs_read"}, 2, "--duration must be positive"},
		{"interval zero", []string{"--stats", "--interval", "0s", "vfs_read"}, 2, "--interval must be positive"},
		{"interval without stats", []string{"--interval", "1s", "vfs_read"}, 2, "--interval needs --stats"},
		{"sort without stats", []string{"--sort", "p99", "vfs_read"}, 2, "--sort needs --stats"},
		{"hist without stats", []string{"--hist", "vfs_read", "vfs_read"}, 2, "--hist needs --stats"},
		{"listen without stats", []string{"--listen", ":9090", "vfs_read"}, 2, "--listen needs --stats"},
		{"listen without a port", []string{"--stats", "--listen", "localhost", "vfs_read"}, 2, "want HOST:PORT or :PORT"},
		{"max-series without listen", []string{"--stats", "--max-series", "10", "vfs_read"}, 2, "--max-series needs --listen or --otlp"},
		{"max-series zero", []string{"--stats", "--listen", ":9090", "--max-series", "0", "vfs_read"}, 2, "--max-series 0: want at least 1"},
		{"pprof without listen", []string{"--stats", "--pprof", "vfs_read"}, 2, "--pprof needs --listen"},
		{"otlp without a scheme", []string{"--otlp", "localhost:4317", "vfs_read"}, 2, "want grpc://HOST:PORT"},
		{"otlp without a port", []string{"--otlp", "grpc://localhost", "vfs_read"}, 2, "name the collector's HOST:PORT"},
		{"otlp grpc with a path", []string{"--otlp", "grpc://localhost:4317/v1", "vfs_read"}, 2, "a gRPC endpoint has no path"},
		{"otlp-values unknown", []string{"--otlp", "grpc://127.0.0.1:4317", "--otlp-values", "some", "vfs_read"}, 2, `--otlp-values "some": want one of none, names, all`},
		{"otlp-values without otlp", []string{"--otlp-values", "all", "vfs_read"}, 2, "--otlp-values needs --otlp"},
		{"otlp-values with stats", []string{"--stats", "--otlp", "grpc://127.0.0.1:4317", "--otlp-values", "none", "vfs_read"}, 2, "--otlp-values shapes the spans"},
		{"otlp-attribute-limit too small", []string{"--otlp", "grpc://127.0.0.1:4317", "--otlp-attribute-limit", "15", "vfs_read"}, 2, "--otlp-attribute-limit must be at least 16, got 15"},
		{"otlp-attribute-limit without otlp", []string{"--otlp-attribute-limit", "64", "vfs_read"}, 2, "--otlp-attribute-limit needs --otlp"},
		{"bad sort", []string{"--stats", "--sort", "colour", "vfs_read"}, 2, `--sort "colour"`},
		{"depth zero", []string{"--depth", "0", "vfs_read"}, 2, "--depth must be 1 to 16"},
		{"depth too big", []string{"--depth", "99", "vfs_read"}, 2, "--depth must be 1 to 16"},
		{"max-bytes too big", []string{"--max-bytes", "100000", "vfs_read"}, 2, "--max-bytes must be 1 to 512"},
		{"comm list", []string{"--comm", "bash,sshd", "vfs_read"}, 2, "--comm takes one name, not a list"},
		{"comm twice", []string{"--comm", "bash", "--comm", "sshd", "vfs_read"}, 2, `--comm takes one name, and "bash" was given already`},
		{"comm too long", []string{"--comm", "a-very-long-task-name", "vfs_read"}, 2, "longer than the kernel's 15"},
		{"two formats", []string{"--json", "--tree", "vfs_read"}, 2, "choose one of"},
		{"no pattern", []string{"--json"}, 2, "no pattern"},
		{"only exclusions", []string{"!vfs_read", "!tcp_*"}, 2, `add '*' to select every function but those: '*' '!vfs_read' '!tcp_*'`},
		{"bad regexp", []string{"/tcp_(/"}, 2, "missing closing )"},
		{"bad glob", []string{"tcp_[x"}, 2, "malformed"},
		{"bad entry", []string{"--entry", "do sys", "vfs_read"}, 2, "cannot contain spaces"},
		{"listen port out of range", []string{"--stats", "--listen", ":99999", "vfs_read"}, 2, "a port from 0 to 65535"},
		{"unknown flag", []string{"--frobnicate", "vfs_read"}, 2, "unknown flag: --frobnicate"},
		{"output is a directory", []string{"-o", dir, "vfs_read"}, 2, "is a directory"},
		{"output in a missing directory", []string{"-o", filepath.Join(dir, "nodir", "x"), "vfs_read"}, 1, "cannot create"},
		{"perfetto and -o", []string{"--perfetto", fresh, "-o", existing, "vfs_read"}, 2, "-o cannot go with it"},
		{"workload and command", []string{"--workload", "vfs_read", "--", "true"}, 2, "--workload and a command"},
		{"command not found", []string{"vfs_read", "--", "/nonexistent/trawl-no-such-command"}, 127, "not found"},
		{"btf missing", []string{"--btf", filepath.Join(dir, "missing"), "vfs_read"}, 2, "--btf " + filepath.Join(dir, "missing") + ": read BTF: open"},
		{"btf not BTF", []string{"--btf", existing, "vfs_read"}, 2, "neither raw BTF nor an ELF file"},
		{"btf ELF without .BTF", []string{"--btf", os.Args[0], "vfs_read"}, 2, "an ELF file without a .BTF section"},
		{"btf-dir without btf", []string{"--btf-dir", dir, "vfs_read"}, 2, "--btf-dir needs --btf"},
		{"btf-dir not a directory", []string{"--btf", "../../internal/kernel/testdata/vmlinux.elf", "--btf-dir", existing, "vfs_read"}, 2, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every case names existing as the output, unless it names
			// its own: none may touch it.
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), " -o ") && args[0] != "-o" {
				args = append([]string{"-o", existing}, args...)
			}
			stdout, stderr, status := runReal(t, args...)
			if status != tc.status {
				t.Errorf("status %d, want %d; stderr:\n%s", status, tc.status, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "trawl: ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("stderr:\n%s\nwant one line, trawl: ... %s", stderr, tc.want)
			}
			if b, err := os.ReadFile(existing); err != nil || string(b) != content {
				t.Errorf("%s changed: %q, %v", existing, b, err)
			}
			if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s created", fresh)
			}
		})
	}
}

// TestBadExpressions checks that a --filter or --show expression that does
// not parse is a usage error found before anything of the kernel's is
// read, shown with a caret under where it goes wrong.
func TestBadExpressions(t *testing.T) {
	guest.HostOnly(t)
	for _, args := range [][]string{
		{"--filter", "skb->", "vfs_read"},
		{"--show", "x->", "vfs_read"},
	} {
		t.Run(args[0], func(t *testing.T) {
			stdout, stderr, status := runReal(t, args...)
			want := "trawl: " + args[0] + ": filter: want a member name after ->"
			if status != 2 || stdout != "" || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "^") {
				t.Errorf("status %d, stdout %q, stderr:\n%s\nwant status 2, %q and a caret", status, stdout, stderr, want)
			}
		})
	}
}

// runReal runs the test binary as trawl with args and returns its stdout,
// stderr and exit status.
func runReal(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := trawlCmd(args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), errOut.String(), exitStatus(t, err)
	case <-time.After(time.Minute):
		killTrawl(cmd)
		<-done
		t.Fatalf("trawl %v still running after a minute", args)
	}
	return "", "", 0
}

// TestListenInUse checks that a --listen address in use is refused before
// anything is traced, in one line.
func TestListenInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	stdout, stderr, status := runReal(t, "--stats", "--listen", ":"+port, "vfs_read")
	if status != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--listen: ") || !strings.Contains(stderr, "address already in use") {
		t.Errorf("status %d, stdout %q, stderr:\n%s\nwant 1 and one line: --listen: ... address already in use", status, stdout, stderr)
	}
}
