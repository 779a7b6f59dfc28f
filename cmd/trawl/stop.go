// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/render"
)

// interrupts is what main's signal handler shares with a run: the first
// SIGINT, SIGTERM or SIGHUP cancels the run's context and stops the trace; a
// second one skips the drain and the detach, and exits at once.
type interrupts struct {
	sig       atomic.Int32  // the first signal's number, 0 before
	hurry     chan struct{} // closed by the second signal
	detaching atomic.Bool   // the run is detaching: a second signal exits there and then
}

type interruptsKey struct{}

// handleSignals returns a context cancelled by the first SIGINT, SIGTERM
// or SIGHUP (the terminal or the ssh connection trawl runs in went away:
// the trace ends as at Ctrl-C, its output flushed and the summary
// printed, rather than being killed with its output lost). A second one closes the hurry channel and, when the run is
// detaching or has not exited a second later, exits with 128 + its number:
// the kernel detaches whatever trawl's closed descriptors held.
// SIGPIPE is caught so that writes to a closed pipe fail with EPIPE (and
// the traced command still starts with SIGPIPE at its default).
func handleSignals() context.Context {
	in := &interrupts{hurry: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), interruptsKey{}, in))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	go func() {
		sig := (<-sigs).(syscall.Signal)
		in.sig.Store(int32(sig))
		cancel()
		sig = (<-sigs).(syscall.Signal)
		close(in.hurry)
		if !in.detaching.Load() {
			time.Sleep(time.Second)
		}
		fmt.Fprintln(os.Stderr, "trawl: interrupted twice: exiting; the kernel detaches what trawl attached as its descriptors close")
		os.Exit(exitSignal + int(sig))
	}()
	return ctx
}

func interruptsOf(ctx context.Context) *interrupts {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	return in
}

// signalOf returns the signal that interrupted the run, or 0.
func signalOf(ctx context.Context) syscall.Signal {
	if in := interruptsOf(ctx); in != nil {
		return syscall.Signal(in.sig.Load())
	}
	return 0
}

// hurryChan returns a channel closed by a second interrupt (nil: never).
func hurryChan(ctx context.Context) <-chan struct{} {
	if in := interruptsOf(ctx); in != nil {
		return in.hurry
	}
	return nil
}

func hurried(ctx context.Context) bool {
	select {
	case <-hurryChan(ctx):
		return true
	default:
		return false
	}
}

func markDetaching(ctx context.Context) {
	if in := interruptsOf(ctx); in != nil {
		in.detaching.Store(true)
	}
}

// stopper ends a trace: at an interrupt, after --duration, when the
// traced command exits.
type stopper struct {
	stopped atomic.Bool
	timer   *time.Timer
	stopCtx func() bool
	mu      sync.Mutex
	reason  string
}

func newStopper(ctx context.Context) *stopper {
	s := &stopper{}
	s.stopCtx = context.AfterFunc(ctx, func() { s.now("interrupted") })
	return s
}

// now stops the trace, for reason.
func (s *stopper) now(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason == "" {
		s.reason = reason
	}
	s.stopped.Store(true)
}

// after stops the trace after d.
func (s *stopper) after(d time.Duration, reason string) {
	s.timer = time.AfterFunc(d, func() { s.now(reason) })
}

// fired says whether the trace is to stop; cheap enough for every call.
func (s *stopper) fired() bool { return s.stopped.Load() }

// why says why the trace stopped.
func (s *stopper) why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

func (s *stopper) release() {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.stopCtx()
}

// gatedCommand is a command started but held before exec until its pid is
// traced, so its first calls are seen.
type gatedCommand struct {
	cmd     *exec.Cmd
	gate    *os.File
	exited  chan struct{} // closed once the command has been waited for
	waitErr error
}

// gateCommand is the hidden subcommand that waits on fd 3, then execs,
// with gateUser UID:GID:GROUPS first as that user.
const (
	gateCommand = "__gate"
	gateUser    = "--user"
)

// startGated starts command held at the gate, as the user cred names
// (nil: as trawl's own).
func startGated(command []string, cred *credential, stdout, stderr io.Writer) (*gatedCommand, error) {
	path, err := exec.LookPath(command[0])
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return nil, &exitError{status: exitNotFound, msg: fmt.Sprintf("command %s: not found", command[0])}
	}
	if err != nil {
		return nil, &exitError{status: exitNotRunnable, msg: fmt.Sprintf("command %s: %v", command[0], err)}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := []string{gateCommand}
	if cred != nil {
		args = append(args, gateUser, cred.arg())
	}
	cmd := exec.Command(exe, append(append(args, path), command...)...)
	if cred != nil {
		cmd.Env = cred.environ(os.Environ())
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, &exitError{status: exitNotRunnable, msg: fmt.Sprintf("start %s: %v", command[0], err)}
	}
	r.Close()
	g := &gatedCommand{cmd: cmd, gate: w, exited: make(chan struct{})}
	go func() {
		g.waitErr = cmd.Wait()
		close(g.exited)
	}()
	return g, nil
}

// release lets the command exec.
func (g *gatedCommand) release() error {
	_, err := g.gate.Write([]byte{1})
	g.gate.Close()
	return err
}

// kill ends the command if it still runs: one held at the gate exits as
// the gate closes.
func (g *gatedCommand) kill() {
	g.gate.Close()
	select {
	case <-g.exited:
	case <-time.After(time.Second):
		g.cmd.Process.Kill()
		<-g.exited
	}
}

// terminate asks the command to end with SIGTERM if it still runs, and
// kills it if it has not ended a second later.
func (g *gatedCommand) terminate() {
	select {
	case <-g.exited:
		return
	default:
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	g.kill()
}

// status returns the command's exit status as trawl's own: nil for 0.
func (g *gatedCommand) status() error {
	<-g.exited
	var ee *exec.ExitError
	if !errors.As(g.waitErr, &ee) {
		return g.waitErr
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return &exitError{status: exitSignal + int(ws.Signal())}
	case ee.ExitCode() > 0:
		return &exitError{status: ee.ExitCode()}
	}
	return g.waitErr
}

// runGate waits for trawl to release it, then becomes the command, as
// the user -u names if it does: the gate starts as root and drops its
// privileges itself, so that trawl's own binary need not be readable by
// that user.
func runGate(_ context.Context, args []string, _, _ io.Writer) error {
	var cred string
	if len(args) > 1 && args[0] == gateUser {
		cred, args = args[1], args[2:]
	}
	if len(args) < 2 {
		return fmt.Errorf("%w: %s [%s UID:GID:GROUPS] PATH ARGV...", errUsage, gateCommand, gateUser)
	}
	gate := os.NewFile(3, "gate")
	var b [1]byte
	if n, _ := gate.Read(b[:]); n != 1 {
		// trawl went away before releasing the command.
		os.Exit(1)
	}
	gate.Close()
	if cred != "" {
		if err := becomeUser(cred); err != nil {
			return &exitError{status: exitNotRunnable, msg: fmt.Sprintf("command %s: -u: %v", args[1], err)}
		}
	}
	if err := syscall.Exec(args[0], args[1:], os.Environ()); err != nil {
		return &exitError{status: exitNotRunnable, msg: fmt.Sprintf("command %s: %v", args[1], err)}
	}
	return nil
}

// pidMax is the largest process id of the running kernel.
func pidMax() int64 {
	const limit = 4 << 20 // PID_MAX_LIMIT on 64-bit kernels
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return limit
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return limit
	}
	return n
}

// summary writes what was seen and lost. Every call the program saw end
// is accounted for: read, not read (the trace stopped first), dropped
// (ring buffer full), filtered at exit, or still in the ring buffer. The
// lines after the first say only the counts that are not zero, so a trace
// that lost nothing ends with one line; all (--debug) writes every count.
func summary(w io.Writer, st trawl.Stats, all bool) {
	if st.Counted > 0 {
		fmt.Fprintf(w, "trawl: %d calls: %d counted in the kernel, %d filtered out at exit", st.Calls, st.Counted, st.FilteredExit)
	} else {
		fmt.Fprintf(w, "trawl: %d calls: %d read, %d not read (the trace stopped first), %d dropped (ring buffer full), %d filtered out at exit",
			st.Calls, st.Received-st.Discarded-st.Malformed, st.Discarded, st.Drops, st.FilteredExit)
	}
	if left := int64(st.Calls) - int64(st.Received+st.Counted+st.Drops+st.FilteredExit); left > 0 {
		fmt.Fprintf(w, ", %d in flight", left)
	}
	fmt.Fprintf(w, "; %d functions attached, %d skipped\n", st.Attached, st.Skipped.Count())
	if st.Malformed > 0 {
		fmt.Fprintf(w, "trawl: %d records skipped: they did not decode\n", st.Malformed)
	}
	if c := counts(all, count{st.Filtered, "by task (pid, comm, cgroup)"}, count{st.FilteredExpr, "by --filter"}); c != "" {
		fmt.Fprintf(w, "trawl: filtered in the kernel at entry: %s\n", c)
	}
	if c := counts(all,
		count{st.MissStorage, "entries without task storage"},
		count{st.MissDepth, "calls nested too deep"},
		count{st.MissEntry, "exits without entry"},
		count{st.MissExit, "entries without exit"},
		count{st.MissFrame, "calls without their captured memory (frame evicted)"},
		count{st.MissPIDs, "children not followed (pids map full)"},
	); c != "" {
		fmt.Fprintf(w, "trawl: missed: %s\n", c)
	}
	if st.MissErrno > 0 {
		fmt.Fprintf(w, "trawl: %d errors not counted by errno (the errno map was full)\n", st.MissErrno)
	}
	if st.MissFigures > 0 {
		fmt.Fprintf(w, "trawl: %d calls counted without their duration and error (the figures map refused their function)\n", st.MissFigures)
	}
	if st.OutsideEntry > 0 || st.Chains > 0 || st.MissChain > 0 {
		fmt.Fprintf(w, "trawl: --entry: %d calls outside every entry call left out in the kernel, %d error chains", st.OutsideEntry, st.Chains)
		if st.MissChain > 0 || all {
			fmt.Fprintf(w, ", %d chain calls lost (chain buffer full)", st.MissChain)
		}
		fmt.Fprintln(w)
	}
	if st.StaleGates > 0 {
		fmt.Fprintf(w, "trawl: --entry: %d entry calls whose exit was missed, their gate shut by a later call\n", st.StaleGates)
	}
	if st.Tracked > 0 || st.Untracked > 0 {
		fmt.Fprintf(w, "trawl: --track: %d journeys, %d objects tracked: %d freed, %d expired, %d evicted (tracking map full), %d still tracked; %d entries left out, receiving no tracked object\n",
			st.Journeys, st.Tracked, st.TrackFreed, st.TrackExpired, st.TrackEvicted, max(int64(st.Tracked)-int64(st.TrackFreed+st.TrackExpired+st.TrackEvicted), 0), st.Untracked)
	}
	if st.MissStack > 0 {
		fmt.Fprintf(w, "trawl: --stack: %d calls without their kernel stack (stack map full or hash collision)\n", st.MissStack)
	}
	if st.MissUserStack > 0 {
		fmt.Fprintf(w, "trawl: --stack: %d calls without their user stack (stack map full or hash collision)\n", st.MissUserStack)
	}
	if st.MissStackCount > 0 {
		fmt.Fprintf(w, "trawl: --stack: %d calls counted without their stacks, as [stack-not-counted] (more distinct stacks than --stack-counts)\n", st.MissStackCount)
	}
	if st.ShortUserStack > 0 {
		fmt.Fprintf(w, "trawl: --stack: %d distinct user stacks end early, in code without frame pointers: shown as far as they go\n", st.ShortUserStack)
	}
	if st.CookieLookups > 0 {
		fmt.Fprintf(w, "trawl: %d kprobe runs found their function by the attach cookie, slower than by address\n", st.CookieLookups)
	}
	var progs []string
	for p, n := range st.RecursionMisses {
		if n > 0 || all {
			progs = append(progs, fmt.Sprintf("%s %d", p, n))
		}
	}
	slices.Sort(progs)
	if len(progs) > 0 {
		fmt.Fprintf(w, "trawl: recursion misses: %s\n", strings.Join(progs, ", "))
	}
	for _, line := range st.Skipped.Summary(3) {
		// Function names come from the kernel's lists.
		fmt.Fprintln(w, "trawl: skipped", render.Escape(line))
	}
}

// count is a number of the summary, and what it counts.
type count struct {
	n    uint64
	what string
}

// counts writes the counts that are not zero, or all of them, as "N what"
// separated by commas; "" for none.
func counts(all bool, cs ...count) string {
	var out []string
	for _, c := range cs {
		if c.n > 0 || all {
			out = append(out, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(out, ", ")
}

// lateSummary reports the calls that ended or were counted between the
// summary and the end of the detach, which no output shows, with the
// final account of every call.
func lateSummary(w io.Writer, before, after trawl.Stats) {
	if after.Calls == before.Calls && after.Received == before.Received && after.Drops == before.Drops && after.FilteredExit == before.FilteredExit {
		return
	}
	if after.Counted > 0 {
		fmt.Fprintf(w, "trawl: by the end of the detach, %d calls: %d counted in the kernel, %d filtered out at exit\n",
			after.Calls, after.Counted, after.FilteredExit)
		return
	}
	fmt.Fprintf(w, "trawl: by the end of the detach, %d calls: %d read, %d not read, %d dropped (ring buffer full), %d filtered out at exit\n",
		after.Calls, after.Received-after.Discarded-after.Malformed, after.Discarded, after.Drops, after.FilteredExit)
}
