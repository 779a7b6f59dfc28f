// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const root = "../../internal/kernel/testdata/amd64"

func runTrawl(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestList(t *testing.T) {
	out, stderr, err := runTrawl("list", "--root", root, "tcp_sendmsg", "nf_conntrack:nf_conntrack_in", "NF_HOOK*")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	want := "NF_HOOK.constprop.0(?)  (no BTF prototype: compiler clone of NF_HOOK (.constprop.0): its arguments differ from the BTF prototype)\n" +
		"nf_conntrack_in(?) [nf_conntrack]  (no BTF prototype: module nf_conntrack has no BTF)\n" +
		"int tcp_sendmsg(struct sock *sk, struct msghdr *msg, size_t size)\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestListVerbose(t *testing.T) {
	out, _, err := runTrawl("list", "migrate_*", "vfs_read", "-v", "--root", root, "/^(calibrate_delay|native_sched_clock)$/")
	if err != nil {
		t.Fatal(err)
	}
	want := "void calibrate_delay(void)\n" +
		"int migrate_pages_batch(struct list_head *from, new_folio_t *get_new_folio, free_folio_t *put_new_folio, long unsigned int private, enum migrate_mode mode, int reason, struct list_head *ret_folios, struct list_head *split_folios, struct migrate_pages_stats *stats, int nr_pass)\n" +
		"ssize_t vfs_read(struct file *file, char *buf, size_t count, loff_t *pos)\n" +
		"excluded: migrate_disable: on the kernel's fentry deny list (btf_id_deny in kernel/bpf/verifier.c)\n" +
		"excluded: native_sched_clock: not in available_filter_functions: notrace, or not patchable by ftrace\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestListJSON(t *testing.T) {
	out, _, err := runTrawl("list", "--json", "--root", root, "ZSTD_CCtx_setFParams", "ip_finish_output2")
	if err != nil {
		t.Fatal(err)
	}
	var got jsonList
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Functions) != 2 {
		t.Fatalf("%d functions", len(got.Functions))
	}
	ip, z := got.Functions[1], got.Functions[0]
	if len(ip.Addrs) != 2 || ip.Slots != 3 {
		t.Errorf("ip_finish_output2: %+v", ip)
	}
	if z.Slots != 3 || len(z.Args) != 2 || z.Args[1].Class != "struct" || z.Args[1].Size != 12 {
		t.Errorf("ZSTD_CCtx_setFParams: %+v", z)
	}
}

func TestListErrors(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"list", "--root", root}, true, "at least one pattern"},
		{[]string{"list", "--root", root, "--bogus", "x"}, true, "unknown flag: --bogus"},
		{[]string{"list", "--root", root, "nosuch"}, false, `pattern "nosuch" matches no function`},
		{[]string{"list", "--root", root, "tcp_sendmsgg"}, false, `pattern "tcp_sendmsgg" matches no function; did you mean tcp_sendmsg?`},
		{[]string{"list", "--root", root, "/(/"}, true, "missing closing )"},
		{[]string{"list", "--root", root, "!vfs_read"}, true, "every pattern is an exclusion"},
		{[]string{"list", "--root", "/nonexistent", "x"}, true, "--root: directory /nonexistent does not exist"},
		{[]string{"list", "--root", "main.go", "x"}, true, "--root: main.go is not a directory"},
		{[]string{"list", "--root", ".", "x"}, false, "kernel BTF not found"},
		{[]string{"--frobnicate", "tcp_*"}, true, "unknown flag: --frobnicate"},
		{[]string{"-p", "1"}, true, "no pattern"},
		{[]string{"--json", "--tree", "x"}, true, "choose one of"},
		{[]string{"-p", "1", "x", "--", "true"}, true, "-p and a command"},
		{nil, true, "no command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runTrawl(tc.args...)
			if err == nil || isUsage(err) != tc.usage || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want usage=%v error containing %q", err, tc.usage, tc.want)
			}
		})
	}
}

// epipeWriter is a reader that went away after the first write.
type epipeWriter struct{ n int }

func (w *epipeWriter) Write(p []byte) (int, error) {
	if w.n++; w.n > 1 {
		return 0, syscall.EPIPE
	}
	return len(p), nil
}

// TestListReaderGone: trawl list '*' | head ends quietly once head has
// its lines.
func TestListReaderGone(t *testing.T) {
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"list", "--root", root, "*"}, &epipeWriter{}, &errOut)
	if err != nil || strings.Contains(errOut.String(), "broken pipe") {
		t.Errorf("error %v, stderr:\n%s", err, errOut.String())
	}
}

// TestRoomForHeap checks that a trace whose heap outgrows the default
// soft memory limit gets a quarter of room above it, and that one within
// it keeps the default.
func TestRoomForHeap(t *testing.T) {
	for _, tc := range []struct{ live, want int64 }{
		{0, memoryLimit},
		{90 << 20, memoryLimit},  // every function of arm64-7.3
		{102 << 20, memoryLimit}, // a quarter of room left
		{120 << 20, 150 << 20},   // more than the default was sized for
		{400 << 20, 500 << 20},
	} {
		if got := roomForHeap(tc.live); got != tc.want {
			t.Errorf("roomForHeap(%d MiB) = %d MiB, want %d MiB", tc.live>>20, got>>20, tc.want>>20)
		}
	}
}

// TestListVerboseRaw shows how functions without a prototype are read: a
// compiler clone's return type from the function it was made from, or
// else a guess.
func TestListVerboseRaw(t *testing.T) {
	out, stderr, err := runTrawl("list", "-v", "--root", root, "NF_HOOK*", "HUF_decompress4X1_usingDTable_internal_fast.*")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	want := "HUF_decompress4X1_usingDTable_internal_fast.constprop.0(?)  (no BTF prototype: compiler clone of HUF_decompress4X1_usingDTable_internal_fast (.constprop.0): its arguments differ from the BTF prototype; it returns what HUF_decompress4X1_usingDTable_internal_fast returns; read: arguments as raw registers, the return value as size_t)\n" +
		"NF_HOOK.constprop.0(?)  (no BTF prototype: compiler clone of NF_HOOK (.constprop.0): its arguments differ from the BTF prototype; read: arguments as raw registers, the return value guessed as long, an errno from -4095 to -1)\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestListBTF checks that list reads the kernel's BTF from the file --btf
// names, raw or in an ELF file, when the root has none, and that list and
// features refuse a file that holds no BTF as a usage error.
func TestListBTF(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"proc", "sys/kernel/tracing"} {
		abs, err := filepath.Abs(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := runTrawl("list", "--root", dir, "vfs_read"); err == nil || !strings.Contains(err.Error(), "kernel BTF not found") {
		t.Fatalf("without BTF: %v, want kernel BTF not found", err)
	}
	for _, file := range []string{root + "/sys/kernel/btf/vmlinux", "../../internal/kernel/testdata/vmlinux.elf"} {
		out, stderr, err := runTrawl("list", "--root", dir, "--btf", file, "vfs_read")
		if err != nil {
			t.Fatalf("--btf %s: %v\n%s", file, err, stderr)
		}
		if want := "ssize_t vfs_read(struct file *file, char *buf, size_t count, loff_t *pos)\n"; out != want {
			t.Errorf("--btf %s: got %q, want %q", file, out, want)
		}
	}
	notBTF := filepath.Join(dir, "proc", "kallsyms")
	for _, args := range [][]string{
		{"list", "--root", dir, "--btf", notBTF, "vfs_read"},
		{"features", "--btf", notBTF},
	} {
		_, _, err := runTrawl(args...)
		if !isUsage(err) || !strings.Contains(err.Error(), "neither raw BTF nor an ELF file") {
			t.Errorf("%s with a file that is not BTF: %v, want a usage error", args[0], err)
		}
	}
}
