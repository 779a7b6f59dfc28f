// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// roleEnv set to "trawl" makes the test binary run trawl's main, for the
// tests of the real command line.
const roleEnv = "TRAWL_TEST_ROLE"

// hotloopArg as the first argument makes the test binary call getppid in
// a loop, for the duration in the second argument (0s: for ever).
const hotloopArg = "__hotloop"

// startHotloop starts the test binary calling getppid in a loop until
// the test ends.
func startHotloop(t *testing.T) {
	t.Helper()
	loop := exec.Command(os.Args[0], hotloopArg, "0s")
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		loop.Process.Kill()
		loop.Wait()
	})
}

func TestMain(m *testing.M) {
	switch {
	case len(os.Args) == 3 && os.Args[1] == hotloopArg:
		d, _ := time.ParseDuration(os.Args[2])
		end := time.Now().Add(d)
		for i := 0; d == 0 || i%1024 != 0 || time.Now().Before(end); i++ {
			syscall.Getppid()
		}
		os.Exit(0)
	case len(os.Args) == 4 && os.Args[1] == callsArg:
		getppids, _ := strconv.Atoi(os.Args[2])
		closes, _ := strconv.Atoi(os.Args[3])
		calls(getppids, closes)
		if path := os.Getenv(callsDoneEnv); path != "" {
			os.WriteFile(path, nil, 0o644)
		}
		time.Sleep(time.Hour) // until stopped
	case len(os.Args) == 3 && os.Args[1] == forkloopArg:
		n, _ := strconv.Atoi(os.Args[2])
		if err := forkloop(n); err != nil {
			fmt.Fprintln(os.Stderr, "fork loop:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case len(os.Args) == 3 && os.Args[1] == soakloadArg:
		d, _ := time.ParseDuration(os.Args[2])
		if err := soakload(d); err != nil {
			fmt.Fprintln(os.Stderr, "soak workload:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case len(os.Args) >= 3 && os.Args[1] == capsOnlyArg:
		if err := capsOnly(strings.Split(os.Args[2], ","), os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "run trawl with fewer capabilities:", err)
			os.Exit(1)
		}
	case len(os.Args) >= 2 && os.Args[1] == opensArg:
		opens(os.Args[2:])
		os.Exit(0)
	case len(os.Args) == 3 && os.Args[1] == tcpSendArg:
		n, _ := strconv.Atoi(os.Args[2])
		if err := onOneCPU(); err != nil {
			fmt.Fprintln(os.Stderr, "tcp send:", err)
			os.Exit(1)
		}
		if err := tcpSend(n); err != nil {
			fmt.Fprintln(os.Stderr, "tcp send:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case len(os.Args) == 2 && os.Args[1] == udpSendArg:
		if err := udpSend(); err != nil {
			fmt.Fprintln(os.Stderr, "udp send:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case len(os.Args) == 4 && os.Args[1] == readLaterArg:
		d, _ := time.ParseDuration(os.Args[3])
		if err := readLater(os.Args[2], d); err != nil {
			fmt.Fprintln(os.Stderr, "read later:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case len(os.Args) >= 2 && os.Args[1] == readsArg:
		reads(os.Args[2:])
		os.Exit(0)
	case len(os.Args) == 3 && os.Args[1] == readSendArg:
		reads(os.Args[2:])
		if err := udpSend(); err != nil {
			fmt.Fprintln(os.Stderr, "udp send:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case len(os.Args) >= 2 && os.Args[1] == opensLingerArg:
		opens(os.Args[2:])
		time.Sleep(lingerTime)
		os.Exit(0)
	case len(os.Args) >= 2 && os.Args[1] == inPIDNamespaceArg:
		if err := inPIDNamespace(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "run trawl in a PID namespace:", err)
			os.Exit(1)
		}
	case len(os.Args) >= 2 && os.Args[1] == withoutBTFArg:
		if err := withoutBTF(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "run trawl without the kernel's BTF:", err)
			os.Exit(1)
		}
	case len(os.Args) == 3 && os.Args[1] == openLoopArg:
		openLoop(os.Args[2])
	case len(os.Args) == 3 && os.Args[1] == pidOpenArg:
		fmt.Println(os.Getpid())
		opens(os.Args[2:])
		os.Exit(0)
	case len(os.Args) == 3 && os.Args[1] == writeArg:
		if err := os.WriteFile(os.DevNull, []byte(os.Args[2]), 0); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case len(os.Args) == 3 && os.Args[1] == openWaitArg:
		openWait(os.Args[2])
		os.Exit(0)
	case len(os.Args) == 2 && os.Args[1] == whoamiArg:
		whoami()
		os.Exit(0)
	case os.Getenv(roleEnv) == "trawl":
		os.Args = append([]string{"trawl"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// callsDoneEnv, when set, names a file the command of callsArg writes
// once it has made its calls.
const callsDoneEnv = "TRAWL_TEST_CALLS_DONE"

// hotFunc is the pattern of the function the hot loop calls.
const hotFunc = "*sys_getppid"

// stopLimit is how long a trace may take to end after it was told to,
// under emulation: a hang, not a slow stop, makes these tests fail.
const stopLimit = 60 * time.Second

// startLimit is how long trawl may take to start tracing under emulation.
const startLimit = 3 * time.Minute

// trawlCmd returns the real trawl command line with args, in a process
// group of its own (ownGroup).
func trawlCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), roleEnv+"=trawl")
	return ownGroup(cmd)
}

// ownGroup puts cmd, not yet started, in a process group of its own, so
// that killTrawl ends the commands it starts too. A command left running
// by a killed trawl would keep the output pipes open: Wait stops waiting
// for them 10 s after trawl exits, so a failing test fails, not hangs.
func ownGroup(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// killTrawl kills cmd, put in its own group by ownGroup, and every
// process it started.
func killTrawl(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// startTrawl starts cmd, made by trawlCmd, in the background, its stderr
// in the buffer returned. The channel receives its exit; when the test
// ends, trawl is killed if it still runs.
func startTrawl(t *testing.T, cmd *exec.Cmd) (*syncBuffer, <-chan error) {
	t.Helper()
	errOut := &syncBuffer{}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		killTrawl(cmd)
		<-exited
	})
	return errOut, done
}

// waitExit waits at most limit for trawl, started by startTrawl, to exit
// and returns what Wait returned; past limit it kills trawl and fails the
// test with its stderr.
func waitExit(t *testing.T, cmd *exec.Cmd, done <-chan error, stderr *syncBuffer, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		killTrawl(cmd)
		t.Fatalf("%v still running after %v\nstderr:\n%s", cmd.Args, limit, stderr.String())
	}
	return nil
}

// hotloop returns the command line of the hot loop, running for d (0: for
// ever).
func hotloop(d time.Duration) []string {
	return []string{os.Args[0], hotloopArg, d.String()}
}

// backendsHere returns the backends the guest's kernel has, skipping the
// others with the reason. The per-function backends (fentry, kprobe) are
// left out where the kernel has a newer one of their family: the guests
// where they are the best choice test them (fentry on 5.10-6.12, kprobe
// on 5.10 and arm64-6.12), and the same programs and links would be
// tested again under emulation.
func backendsHere(t *testing.T) []string {
	have, notes := kernelBackends()
	for _, n := range notes {
		t.Log(n)
	}
	return slices.Clone(have)
}

// kernelBackends works out backendsHere's list once per test process, as
// it does not change in a boot; notes say why each backend left out is.
var kernelBackends = sync.OnceValues(func() (have, notes []string) {
	for _, b := range backends[1:] {
		if _, _, err := trawl.ChooseBackend(trawl.Config{Patterns: []string{hotFunc}, Backend: trawl.Backend(b)}); err != nil {
			notes = append(notes, fmt.Sprintf("%s: skipped on %s: %v", b, guest.Kernel(), err))
			continue
		}
		have = append(have, b)
	}
	have, more := guest.NewestOfFamily(have)
	return have, append(notes, more...)
})

// onePerFamily returns the newest trampoline backend and the newest kprobe
// backend the guest's kernel has: for tests of what the capture program
// does alike on every backend of a family (where the arguments are read
// from), which need not run on each.
func onePerFamily(t *testing.T) []string {
	have := backendsHere(t)
	var pick []string
	for _, family := range [][]string{
		{string(trawl.BackendTracingMulti), string(trawl.BackendFsession), string(trawl.BackendFentry)},
		{string(trawl.BackendKprobeSession), string(trawl.BackendKprobeMulti), string(trawl.BackendKprobe)},
	} {
		for _, b := range family {
			if slices.Contains(have, b) {
				pick = append(pick, b)
				break
			}
		}
	}
	return pick
}

// run runs cmd to its end, failing the test if it takes more than limit,
// and returns its stdout, stderr and exit status.
func runLimited(t *testing.T, cmd *exec.Cmd, limit time.Duration) (string, string, int) {
	t.Helper()
	ownGroup(cmd)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), errOut.String(), exitStatus(t, err)
	case <-time.After(limit):
		killTrawl(cmd)
		<-done
		t.Fatalf("%v still running after %v\nstderr:\n%s", cmd.Args, limit, errOut.String())
	}
	return "", "", 0
}

func exitStatus(t *testing.T, err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

var callsLine = regexp.MustCompile(`trawl: (\d+) calls: (?:(\d+) read, (\d+) not read \(the trace stopped first\), (\d+) dropped \(ring buffer full\)|(\d+) counted in the kernel), (\d+) filtered out at exit`)

// account returns the numbers of a summary line matched by callsLine or
// finalLine: calls, read (or counted in the kernel), not read, dropped,
// filtered out at exit.
func account(m []string) [5]uint64 {
	var n [5]uint64
	for i, g := range []int{1, 2, 3, 4, 6} {
		n[i], _ = strconv.ParseUint(m[g], 10, 64)
	}
	if m[5] != "" {
		n[1], _ = strconv.ParseUint(m[5], 10, 64)
	}
	return n
}

// checkSummary checks the summary is there and accounts for every call,
// and that calls were seen; it returns the number of calls.
func checkSummary(t *testing.T, stderr string) uint64 {
	t.Helper()
	m := callsLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary in stderr:\n%s", stderr)
	}
	n := account(m)
	if n[0] == 0 {
		t.Errorf("no call of the hot loop seen:\n%s", stderr)
	}
	if sum := n[1] + n[2] + n[3] + n[4]; sum > n[0] {
		t.Errorf("read + not read + dropped + filtered = %d, more than the %d calls:\n%s", sum, n[0], stderr)
	}
	return n[0]
}

// TestStopUnderLoad traces with every backend the kernel has, and checks
// the trace ends on time: at its --duration while the command still runs
// (with --stats, which must have counted each of the command's calls
// exactly), and when the command, a hot loop, exits first; each time with
// the summary, and with the command's status.
func TestStopUnderLoad(t *testing.T) {
	guest.Require(t)
	for _, b := range backendsHere(t) {
		t.Run(b+"/duration", func(t *testing.T) {
			// The command makes a known number of calls, then waits to
			// be stopped: --stats counts each of them in the kernel.
			const getppids, closes = 5000, 100
			out := filepath.Join(t.TempDir(), "stats")
			start := time.Now()
			cmd := trawlCmd("--backend", b, "--duration", "5s", "--stats", "-o", out, hotFunc, "*sys_close", "--",
				os.Args[0], callsArg, strconv.Itoa(getppids), strconv.Itoa(closes))
			_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			t.Logf("ended after %v, status %d", time.Since(start).Round(time.Millisecond), status)
			if !strings.Contains(stderr, "stopping: duration") {
				t.Errorf("no stop at the duration:\n%s", stderr)
			}
			// trawl ended the command with SIGTERM, and says so.
			if status != 128+int(syscall.SIGTERM) {
				t.Errorf("status %d, want %d (the command's: SIGTERM)\n%s", status, 128+int(syscall.SIGTERM), stderr)
			}
			checkSummary(t, stderr)
			if !strings.Contains(stderr, " counted in the kernel") {
				t.Errorf("the calls were not counted in the kernel:\n%s", stderr)
			}
			table, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			rows := statsRows(string(table))
			if got := rows["getppid"]; got != [2]uint64{getppids, 0} {
				t.Errorf("getppid: %d calls, %d errors; want %d, 0\n%s", got[0], got[1], getppids, table)
			}
			if got := rows["close"]; got[0] < closes || got[1] != closes {
				t.Errorf("close: %d calls, %d errors; want at least %d calls and %[3]d errors\n%s", got[0], got[1], closes, table)
			}
		})
		t.Run(b+"/command-exits", func(t *testing.T) {
			cmd := trawlCmd(append([]string{"--backend", b, hotFunc, "--"}, hotloop(2*time.Second)...)...)
			stdout, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Errorf("status %d, want the command's 0\n%s", status, stderr)
			}
			if !strings.Contains(stderr, "stopping: command exited") {
				t.Errorf("no stop at the command's exit:\n%s", stderr)
			}
			calls := checkSummary(t, stderr)
			if lines := strings.Count(stdout, "getppid("); lines == 0 || uint64(lines) > calls {
				t.Errorf("%d calls shown of %d", lines, calls)
			}
		})
	}
}

// TestStopSystemWide traces the whole system while a hot loop runs, and
// stops the trace with SIGTERM, SIGHUP, two SIGINTs, and by closing the
// pipe trawl writes to.
func TestStopSystemWide(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "stopping a system-wide trace", guest.SpareAmd64, "arm64-5.10")
	for _, tc := range []struct {
		name    string
		signals int // how many SIGINTs; -1: SIGTERM, -2: SIGHUP, 0: close the pipe
		status  int
		want    string
	}{
		{"sigterm", -1, 0, "stopping: interrupted"},
		{"sighup", -2, 0, "stopping: interrupted"},
		{"sigint-twice", 2, 128 + int(syscall.SIGINT), "interrupted twice"},
		{"epipe", 0, 0, "the output's reader went away"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := trawlCmd(hotFunc)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errOut syncBuffer
			cmd.Stderr = &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Start the hot loop once trawl is tracing (starting up
			// beside it takes minutes under emulation), then wait for
			// calls to flow: the first line of output.
			for !strings.Contains(errOut.String(), "trawl: tracing") {
				if time.Since(started) > startLimit {
					killTrawl(cmd)
					t.Fatalf("not tracing after %v\n%s", startLimit, errOut.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			startHotloop(t)
			first := make(chan error, 1)
			go func() {
				br := bufio.NewReader(stdout)
				_, err := br.ReadString('\n')
				first <- err
				if tc.signals != 0 {
					// Keep reading, as a terminal would.
					io.Copy(io.Discard, br)
				}
			}()
			select {
			case err := <-first:
				if err != nil {
					t.Fatalf("no output: %v\n%s", err, errOut.String())
				}
			case <-time.After(stopLimit):
				killTrawl(cmd)
				t.Fatalf("no output after %v\n%s", stopLimit, errOut.String())
			}
			t.Logf("first call shown after %v", time.Since(started).Round(time.Millisecond))
			switch tc.signals {
			case 0:
				stdout.Close()
			case -1:
				cmd.Process.Signal(syscall.SIGTERM)
			case -2:
				cmd.Process.Signal(syscall.SIGHUP)
			default:
				// The next SIGINT once trawl has taken the first: two
				// sent before it runs are one pending signal (a busy
				// guest may not run it for a while), and trawl rightly
				// stops once.
				for i := range tc.signals {
					cmd.Process.Signal(syscall.SIGINT)
					for i == 0 && !strings.Contains(errOut.String(), "trawl: stopping") && time.Since(started) < startLimit+stopLimit {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}
			start := time.Now()
			select {
			case err := <-done:
				if got := exitStatus(t, err); got != tc.status {
					t.Errorf("status %d, want %d\n%s", got, tc.status, errOut.String())
				}
			case <-time.After(stopLimit):
				killTrawl(cmd)
				t.Fatalf("still running %v after the stop\n%s", stopLimit, errOut.String())
			}
			t.Logf("ended %v after the stop", time.Since(start).Round(time.Millisecond))
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut.String())
			}
			checkSummary(t, errOut.String())
		})
	}
}

// syncBuffer is a bytes.Buffer safe to write from the command's copier
// while the test reads it; it notes when each write came.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []timedWrite
}

type timedWrite struct {
	at   time.Time
	text string
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes = append(b.writes, timedWrite{time.Now(), string(p)})
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// when returns when text was first written (zero: never, or split over
// writes).
func (b *syncBuffer) when(text string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.writes {
		if strings.Contains(w.text, text) {
			return w.at
		}
	}
	return time.Time{}
}

// TestStopDuringAttach interrupts trawl while it attaches, one fentry
// program pair per function (kprobe and kretprobe where the kernel has no
// fentry): it must detach what it attached, print the summary with what
// was attached and skipped so far, and say it was interrupted, with the
// status of SIGINT.
func TestStopDuringAttach(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "stopping during a per-function attach", guest.SpareAmd64, guest.SpareArm64)
	b := trawl.BackendFentry
	if _, _, err := trawl.ChooseBackend(trawl.Config{Patterns: []string{hotFunc}, Backend: b}); err != nil {
		t.Logf("%s: %v", b, err)
		b = trawl.BackendKprobe
	}
	cmd := trawlCmd("--backend", string(b), "vfs_*")
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	start := time.Now()
	for !strings.Contains(errOut.String(), "trawl: attached ") {
		if strings.Contains(errOut.String(), "trawl: tracing") {
			killTrawl(cmd)
			t.Skipf("attached everything before a progress line could be seen:\n%s", errOut.String())
		}
		if time.Since(start) > startLimit {
			killTrawl(cmd)
			t.Fatalf("no attach progress after %v\n%s", startLimit, errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if got, want := exitStatus(t, err), 128+int(syscall.SIGINT); got != want {
			t.Errorf("status %d, want %d", got, want)
		}
	case <-time.After(startLimit):
		killTrawl(cmd)
		t.Fatalf("still running %v after the interrupt\n%s", startLimit, errOut.String())
	}
	stderr := errOut.String()
	t.Logf("stderr:\n%s", stderr)
	if !strings.Contains(stderr, "trawl: interrupted before tracing began") {
		t.Error("does not say it was interrupted")
	}
	m := regexp.MustCompile(`; (\d+) functions attached, (\d+) skipped`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatal("no summary")
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Error("summary says nothing was attached, though progress said some was")
	}
}

// forkloopArg as the first argument makes the test binary start the number
// of children in the second argument, one after the other, each calling
// execve once and exiting.
const forkloopArg = "__forkloop"

// forkloopFunc is the pattern of the function each forkloop child calls.
const forkloopFunc = "*sys_execve"

// forkloop starts n child processes in turn with syscall.ForkExec of a
// path that does not exist: each child calls execve, which fails, and
// exits. ForkExec vforks, as os/exec does, so no child copies the page
// tables of a Go process (milliseconds each under emulation), and the
// child runs only the runtime's own vfork-safe code: Go code of ours in a
// vforked child would write to the stack it shares with the parent.
func forkloop(n int) error {
	const missing = "/nonexistent/trawl-forkloop-child"
	for range n {
		_, err := syscall.ForkExec(missing, []string{missing}, &syscall.ProcAttr{})
		if !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("fork and exec %s: %v, want ENOENT", missing, err)
		}
	}
	return nil
}

// TestFollowManyChildren traces a command that forks more children, one
// after the other, than the followed-pids map holds (8192): as each exits
// its entry goes, so every child is followed and none is missed.
func TestFollowManyChildren(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "following many children", "amd64-5.10")
	const children = 10000
	cmd := trawlCmd("--stats", forkloopFunc, "--", os.Args[0], forkloopArg, strconv.Itoa(children))
	_, stderr, status := runLimited(t, cmd, 20*time.Minute)
	t.Logf("stderr:\n%s", stderr)
	if status != 0 {
		t.Fatalf("status %d", status)
	}
	// The summary names the children not followed unless there are none.
	if strings.Contains(stderr, "children not followed") {
		t.Error("children not followed")
	}
	if calls := checkSummary(t, stderr); calls < children {
		t.Errorf("%d calls of execve, want at least one per child (%d)", calls, children)
	}
}

// TestSummaryLines checks that the summary of a trace that lost nothing
// is one line, every count of it with --debug, and that a lossy one names
// its losses and no count that is zero: a hot loop through a ring buffer
// of one page drops calls.
func TestSummaryLines(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "the summary, made in user space,", "arm64-5.10")
	// The summary's lines: trawl's, but the reason it stopped and the
	// functions skipped, which are no loss of calls.
	summaryLines := func(stderr string) []string {
		var lines []string
		for line := range strings.Lines(stderr) {
			if strings.HasPrefix(line, "trawl: ") && !strings.HasPrefix(line, "trawl: stopping:") && !strings.HasPrefix(line, "trawl: skipped") {
				lines = append(lines, strings.TrimSuffix(line, "\n"))
			}
		}
		return lines
	}
	// About a thousand calls of getppid, which nothing else in the guest
	// calls, and which capture no memory: none filtered out, none lost.
	clean := append([]string{hotFunc, "--"}, hotloop(time.Millisecond)...)
	t.Run("clean", func(t *testing.T) {
		_, stderr, status := runLimited(t, trawlCmd(append([]string{"-q"}, clean...)...), startLimit+stopLimit)
		lines := summaryLines(stderr)
		if status != 0 || len(lines) != 1 || !callsLine.MatchString(lines[0]) {
			t.Errorf("status %d, want 0 and a summary of one line:\n%s", status, stderr)
		}
	})
	t.Run("clean-debug", func(t *testing.T) {
		_, stderr, status := runLimited(t, trawlCmd(append([]string{"-q", "--debug"}, clean...)...), startLimit+stopLimit)
		lines := summaryLines(stderr)
		if status != 0 || len(lines) < 3 || !callsLine.MatchString(lines[0]) ||
			!strings.HasPrefix(lines[1], "trawl: filtered in the kernel at entry: 0 by task") || !strings.HasPrefix(lines[2], "trawl: missed: 0 entries without task storage") {
			t.Errorf("status %d, want 0 and every count of the summary:\n%s", status, stderr)
		}
	})
	t.Run("lossy", func(t *testing.T) {
		cmd := trawlCmd(append([]string{"-q", "--ring-buffer-size", strconv.Itoa(os.Getpagesize()), hotFunc, "--"}, hotloop(2*time.Second)...)...)
		_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
		lines := summaryLines(stderr)
		m := callsLine.FindStringSubmatch(stderr)
		if status != 0 || m == nil || account(m)[3] == 0 {
			t.Fatalf("status %d, want 0 and calls dropped:\n%s", status, stderr)
		}
		zero := regexp.MustCompile(`(: |, )0 `)
		for _, line := range lines[1:] {
			if zero.MatchString(line) {
				t.Errorf("a count of 0 in the summary: %s\n%s", line, stderr)
			}
		}
		t.Logf("summary:\n%s", strings.Join(lines, "\n"))
	})
}

// callsArg as the first argument makes the test binary call getppid the
// number of times in the second argument, then close(-1), which fails
// with EBADF, the number of times in the third, then wait to be killed.
const callsArg = "__calls"

func calls(getppids, closes int) {
	for range getppids {
		syscall.Getppid()
	}
	for range closes {
		syscall.Close(-1)
	}
}

// statsRows returns the calls and errors of each row of a --stats table,
// by the name of the system call the row's function implements: the rows
// of __x64_sys_close and __ia32_sys_close, say, are summed.
func statsRows(table string) map[string][2]uint64 {
	rows := map[string][2]uint64{}
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		_, name, ok := strings.Cut(f[0], "sys_")
		calls, err1 := strconv.ParseUint(f[1], 10, 64)
		errs, err2 := strconv.ParseUint(f[2], 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		r := rows[name]
		rows[name] = [2]uint64{r[0] + calls, r[1] + errs}
	}
	return rows
}
