// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
	"github.com/trawl-dev/trawl/render"
)

// TestHelp checks that every way of asking for help prints the command's
// help, with every one of its flags, on stdout, and exits 0.
func TestHelp(t *testing.T) {
	guest.HostOnly(t)
	top := newRoot(io.Discard, io.Discard)
	top.InitDefaultCompletionCmd()
	for _, tc := range []struct {
		args []string
		cmd  string // the command whose help it is, "" for trawl's
	}{
		{[]string{"--help"}, ""},
		{[]string{"-h"}, ""},
		{[]string{"help"}, ""},
		{[]string{"vfs_read", "-d", "1s", "--help"}, ""},
		{[]string{"help", "list"}, "list"},
		{[]string{"list", "-h"}, "list"},
		{[]string{"list", "--help"}, "list"},
		{[]string{"help", "features"}, "features"},
		{[]string{"features", "-h"}, "features"},
		{[]string{"help", "completion"}, "completion"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, status := runReal(t, tc.args...)
			if status != 0 || stderr != "" {
				t.Errorf("status %d, stderr:\n%s", status, stderr)
			}
			cmd := top
			if tc.cmd != "" {
				cmd, _, _ = top.Find([]string{tc.cmd})
			}
			if !strings.Contains(stdout, "Usage:\n  "+cmd.UseLine()) {
				t.Errorf("no usage line of %q:\n%s", cmd.UseLine(), stdout)
			}
			cmd.InitDefaultHelpFlag()
			cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(stdout, "--"+f.Name+" ") {
					t.Errorf("--%s not in the help:\n%s", f.Name, stdout)
				}
			})
		})
	}
}

// TestNoArguments checks that trawl alone is a usage error, one line long.
func TestNoArguments(t *testing.T) {
	guest.HostOnly(t)
	stdout, stderr, status := runReal(t)
	if status != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "trawl --help") {
		t.Errorf("status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
}

// TestVersion checks --version and its short form -V, as strace, perf
// and bpftrace spell it.
func TestVersion(t *testing.T) {
	guest.HostOnly(t)
	for _, flag := range []string{"--version", "-V"} {
		stdout, stderr, status := runReal(t, flag)
		if want := trawl.Version().String() + "\n"; status != 0 || stderr != "" || stdout != want {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want stdout %q", flag, status, stdout, stderr, want)
		}
	}
}

// TestFormatAliases checks that each output flag is taken alone, and
// refused beside any other: --format and its aliases choose one format,
// but for --stats with -f folded, which counts by stack in the kernel.
// (The guest's TestFormats checks what each writes.)
func TestFormatAliases(t *testing.T) {
	guest.HostOnly(t)
	dir := t.TempDir()
	choices := [][]string{
		{"--json"}, {"--tree"}, {"--stats"}, {"--perfetto", filepath.Join(dir, "trace")},
		{"-f", "text"}, {"-f", "tree"}, {"--format", "json"}, {"--format=stats"},
		{"-f", "chrome-json"}, {"-f", "perfetto", "-o", filepath.Join(dir, "trace")}, {"-f", "folded"}, {"-f", "html"},
	}
	isFormat := func(a []string) bool {
		return a[0] == "-f" || a[0] == "--format" || strings.HasPrefix(a[0], "--format=")
	}
	for _, a := range choices {
		// A command that does not exist ends the run once the flags
		// were taken, before anything is attached.
		args := append(slices.Clone(a), "vfs_read", "--", "/nonexistent/trawl-no-such-command")
		if _, stderr, status := runReal(t, args...); status != exitNotFound {
			t.Errorf("%v: status %d, want %d: %s", a, status, exitNotFound, stderr)
		}
		for _, b := range choices {
			if isFormat(a) && isFormat(b) || slices.Equal(a, b) {
				continue // the last --format counts
			}
			if foldedStats := [][]string{{"--stats"}, {"-f", "folded"}}; slices.ContainsFunc(foldedStats, func(c []string) bool { return slices.Equal(a, c) }) &&
				slices.ContainsFunc(foldedStats, func(c []string) bool { return slices.Equal(b, c) }) {
				continue
			}
			args := append(append(slices.Clone(a), b...), "vfs_read")
			_, stderr, status := runReal(t, args...)
			if status != 2 || !strings.Contains(stderr, "choose one of") && !strings.Contains(stderr, "-o cannot go with it") {
				t.Errorf("%v: status %d, stderr %q; want a usage error", args, status, stderr)
			}
		}
	}
}

// TestUsageErrors checks the new flags' bad values and mistakes in naming
// a command; TestBadInput has the rest.
func TestUsageErrors(t *testing.T) {
	guest.HostOnly(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "perfetto", "vfs_read"}, "name its file with -o FILE"},
		{[]string{"-f", "xml", "vfs_read"}, `--format "xml": want one of text, tree, json, perfetto, chrome-json, stats, folded, html`},
		{[]string{"--color", "sometimes", "vfs_read"}, `--color "sometimes": want one of auto, always, never`},
		{[]string{"-b", "ebpf", "vfs_read"}, `--backend "ebpf": want one of auto, fentry`},
		{[]string{"--ring-buffer-size", "12K", "vfs_read"}, "power of two"},
		{[]string{"--ring-buffer-size", "4G", "vfs_read"}, "power of two"},
		{[]string{"--ring-buffer-size", "lots", "vfs_read"}, "want a number of bytes"},
		{[]string{"--interval", "1s", "-f", "json", "vfs_read"}, "--interval needs --stats"},
		{[]string{"--stats", "-f", "folded", "--hist", "vfs_read", "vfs_read"}, "--hist goes with the table of --stats, not -f folded"},
		{[]string{"--stats", "--stack", "vfs_read"}, "--stack with --stats counts the calls by stack for a flame graph: add -f folded"},
		{[]string{"--stats", "-f", "json", "vfs_read"}, "--stats goes with -f folded alone"},
		{[]string{"--stack-counts", "10", "-f", "folded", "--stack", "vfs_read"}, "--stack-counts needs --stats -f folded --stack"},
		{[]string{"--stack-counts", "0", "--stats", "-f", "folded", "--stack", "vfs_read"}, "--stack-counts must be at least 1, got 0"},
		{[]string{"-json", "vfs_read"}, "unknown shorthand flag: 'j' in -json"},
		{[]string{"-z", "vfs_read"}, "unknown shorthand flag: 'z'"},
		{[]string{"list", "-root", ".", "x"}, "unknown shorthand flag: 'r' in -root"},
		{[]string{"features", "--frobnicate"}, "unknown flag: --frobnicate"},
		{[]string{"features", "!vfs_read"}, "every pattern is an exclusion"},
		// Cobra answers these with help and status 0 unless told.
		{[]string{"completion", "nope"}, `unknown command "nope" for "trawl completion"`},
		{[]string{"completion"}, "trawl completion wants one of bash, fish, powershell, zsh"},
		{[]string{"completion", "bash", "extra"}, `unknown command "extra" for "trawl completion bash"`},
		{[]string{"help", "nope"}, `no command "nope"`},
		{[]string{"help", "list", "extra"}, `no command "list extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, status := runReal(t, tc.args...)
			if status != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("status %d, stdout %q, stderr %q; want status 2 and one line with %q", status, stdout, stderr, tc.want)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]byteSize{"4096": 4096, "64K": 64 << 10, "64k": 64 << 10, "16M": 16 << 20, "16MiB": 16 << 20, "1G": 1 << 30, "2gib": 2 << 30} {
		var b byteSize
		if err := b.Set(in); err != nil || b != want {
			t.Errorf("%q: %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "K", "-4K", "1.5M", "16MB", "16 M", "4T", "99999999999"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("%q taken as %d", in, b)
		}
	}
	for b, want := range map[byteSize]string{4096: "4K", 16 << 20: "16M", 1 << 31: "2G", 1000: "1000", 3 << 10: "3K"} {
		if got := b.String(); got != want {
			t.Errorf("%d written %q, want %q", b, got, want)
		}
	}
}

// TestColor checks --color on a terminal, a pipe and a buffer, with and
// without NO_COLOR.
func TestColor(t *testing.T) {
	tty := openTerminal(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		color   string
		noColor string
		out     io.Writer
		want    bool
	}{
		{"auto", "", tty, true},
		{"auto", "1", tty, false},
		{"auto", "", w, false},
		{"auto", "", &bytes.Buffer{}, false},
		{"always", "1", w, true},
		{"always", "", &bytes.Buffer{}, true},
		{"never", "", tty, false},
	} {
		t.Setenv("NO_COLOR", tc.noColor)
		f := traceFlags{color: tc.color}
		if got := f.colorFor(tc.out); got != tc.want {
			t.Errorf("--color %s, NO_COLOR=%q, on %T: colour %v, want %v", tc.color, tc.noColor, tc.out, got, tc.want)
		}
	}
}

// openTerminal opens the terminal end of a new pseudo-terminal.
func openTerminal(t *testing.T) *os.File {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty
}

// TestCompletion checks the completion scripts and what they complete:
// function names (from list's --root, here), flag values, and the
// command after --.
func TestCompletion(t *testing.T) {
	guest.HostOnly(t)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		stdout, stderr, status := runReal(t, "completion", shell)
		if status != 0 || len(stdout) < 1000 || !strings.Contains(stdout, "trawl") {
			t.Errorf("completion %s: status %d, %d bytes, stderr %q", shell, status, len(stdout), stderr)
		}
	}
	list := func(word string) []string { return []string{"__complete", "list", "--root", root, word} }
	for _, tc := range []struct {
		args      []string
		want      []string // exactly, before the directive
		directive cobra.ShellCompDirective
	}{
		{list("tcp_sendm"), []string{"tcp_sendmsg"}, cobra.ShellCompDirectiveNoFileComp},
		{list("!tcp_sendm"), []string{"!tcp_sendmsg"}, cobra.ShellCompDirectiveNoFileComp},
		{list("nf_conntrack:nf_conntrack_i"), []string{"nf_conntrack:nf_conntrack_in"}, cobra.ShellCompDirectiveNoFileComp},
		{list("migrate_"), []string{"migrate_pages_batch"}, cobra.ShellCompDirectiveNoFileComp}, // migrate_disable is denied
		{list("tcp_*"), nil, cobra.ShellCompDirectiveNoFileComp},
		{list("nosuch"), nil, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"__complete", "--format", ""}, formats, cobra.ShellCompDirectiveNoFileComp},
		// The shell keeps the values that start with the word.
		{[]string{"__complete", "-b", "kprobe-"}, backends, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"__complete", "--sort", "p"}, render.SortColumns, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"__complete", "--color", ""}, colors, cobra.ShellCompDirectiveNoFileComp},
		{[]string{"__complete", "vfs_read", "--", "l"}, nil, cobra.ShellCompDirectiveDefault},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			stdout, stderr, status := runReal(t, tc.args...)
			if status != 0 {
				t.Fatalf("status %d: %s", status, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			got, directive := lines[:len(lines)-1], lines[len(lines)-1]
			if !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 || directive != ":"+strconv.Itoa(int(tc.directive)) {
				t.Errorf("got %q, directive %s; want %q, :%d", got, directive, tc.want, tc.directive)
			}
		})
	}
}

// TestManPage checks that the committed man pages are what the command
// line writes, through the real binary (make man rewrites them), that
// trawl(1) has every flag of every command, and that groff formats each
// page without warnings.
func TestManPage(t *testing.T) {
	guest.HostOnly(t)
	dir := t.TempDir()
	if _, stderr, status := runReal(t, manCommand, "../../docs", dir); status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	pages := []string{"trawl.1"}
	for _, p := range manSection7 {
		pages = append(pages, p.name+".7")
	}
	for _, name := range pages {
		page, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("../../docs", name))
		if err != nil || !bytes.Equal(page, committed) {
			t.Errorf("docs/%s is stale (%v): run make man and commit it", name, err)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "trawl.1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page, []byte("default []")) {
		t.Error("trawl.1 gives a repeatable flag the default []")
	}
	top := newRoot(io.Discard, io.Discard)
	for _, cmd := range append([]*cobra.Command{top}, top.Commands()...) {
		if !cmd.IsAvailableCommand() {
			continue
		}
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !bytes.Contains(page, []byte(`\-\-`+f.Name)) && !bytes.Contains(page, []byte("--"+f.Name)) {
				t.Errorf("%s --%s not in the man page", cmd.Name(), f.Name)
			}
		})
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("no groff to format the pages")
	}
	for _, name := range pages {
		cmd := exec.Command("groff", "-t", "-man", "-Tutf8", "-ww", "-z", filepath.Join(dir, name))
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff %s: %v\n%s", name, err, out)
		}
	}
}

// TestFormatChosen: each alias chooses its format, as --format does (the
// guest's TestFormats traces one spelling of each).
func TestFormatChosen(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, formatText},
		{[]string{"--json"}, formatJSON}, {[]string{"-f", "json"}, formatJSON},
		{[]string{"--tree"}, formatTree}, {[]string{"--format=tree"}, formatTree},
		{[]string{"--stats"}, formatStats}, {[]string{"-f", "stats"}, formatStats},
		{[]string{"--perfetto", "x"}, formatPerfetto}, {[]string{"-f", "perfetto"}, formatPerfetto},
		{[]string{"-f", "chrome-json"}, formatChromeJSON}, {[]string{"-f", "folded"}, formatFolded}, {[]string{"-f", "html"}, formatHTML},
	} {
		var f traceFlags
		cmd := &cobra.Command{}
		f.register(cmd)
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := f.outputFormat(); got != tc.want {
			t.Errorf("%v: format %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestDuration checks that --duration takes Go durations and, as
// timeout(1) does, plain seconds.
func TestDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"5": 5 * time.Second, "2.5": 2500 * time.Millisecond, "0.5": 500 * time.Millisecond, "0": 0,
		"10s": 10 * time.Second, "1m30s": 90 * time.Second, "500ms": 500 * time.Millisecond, "-1s": -time.Second,
	} {
		var d durationOrSeconds
		if err := d.Set(in); err != nil || time.Duration(d) != want {
			t.Errorf("%q: %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
	for _, in := range []string{"", ".", "5x", "-5", "1e3", "inf", "NaN", "5 s", "1.2.3"} {
		var d durationOrSeconds
		if err := d.Set(in); err == nil {
			t.Errorf("%q taken as %v", in, time.Duration(d))
		}
	}
	var f traceFlags
	cmd := &cobra.Command{}
	f.register(cmd)
	if err := cmd.ParseFlags([]string{"-d", "5"}); err != nil || f.duration != 5*time.Second {
		t.Errorf("-d 5: %v, %v; want 5s", f.duration, err)
	}
}

// TestPIDList checks that -p takes process ids repeated and in
// comma-separated lists, as strace and perf do.
func TestPIDList(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want pidList
	}{
		{[]string{"-p", "1"}, pidList{1}},
		{[]string{"-p", "1,2", "-p", "3"}, pidList{1, 2, 3}},
		{[]string{"--pid=4, 5", "-p6"}, pidList{4, 5, 6}},
	} {
		var f traceFlags
		cmd := &cobra.Command{}
		f.register(cmd)
		if err := cmd.ParseFlags(tc.args); err != nil || !slices.Equal(f.pids, tc.want) {
			t.Errorf("%q: pids %v, %v; want %v", tc.args, f.pids, err, tc.want)
		}
	}
}

func TestParseErrnos(t *testing.T) {
	for in, want := range map[string]struct {
		errnos []syscall.Errno
		except bool
	}{
		"":              {},
		"ENOENT,EINVAL": {[]syscall.Errno{syscall.ENOENT, syscall.EINVAL}, false},
		"!EAGAIN":       {[]syscall.Errno{syscall.EAGAIN}, true},
		"ENOTSUPP":      {[]syscall.Errno{524}, false},
	} {
		errnos, except, err := parseErrnos(in)
		if err != nil || except != want.except || !slices.Equal(errnos, want.errnos) {
			t.Errorf("%q: %v %v %v, want %v %v", in, errnos, except, err, want.errnos, want.except)
		}
	}
	if _, _, err := parseErrnos("ENOPE"); err == nil {
		t.Error("ENOPE taken")
	}
}
