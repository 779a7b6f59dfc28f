// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// tcpSendArg as the first argument makes the test binary send the number
// of bytes in the second argument over a loopback TCP connection, in one
// write, and read them on the other side, which answers one byte: the
// answer's segment acknowledges the bytes, so that the sender frees them
// before it reads the answer.
const tcpSendArg = "__tcpsend"

// onOneCPU runs this program again, in its place, on CPU 0 alone (every
// thread it will start inherits the affinity), unless it already is: TCP
// frees a received skb on the CPU that allocated it, later, when another
// CPU reads it (skb_attempt_defer_free), which can be after the trace
// stopped (seen on amd64-6.12).
func onOneCPU() error {
	if os.Getenv(oneCPUEnv) != "" {
		return nil
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(0)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	return syscall.Exec(os.Args[0], os.Args, append(os.Environ(), oneCPUEnv+"=1"))
}

// oneCPUEnv marks a program onOneCPU ran again.
const oneCPUEnv = "TRAWL_TEST_ONE_CPU"

func tcpSend(n int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		if _, err = io.ReadFull(c, make([]byte, n)); err == nil {
			_, err = c.Write([]byte{1})
		}
		got <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(make([]byte, n)); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return err
	}
	return <-got
}

// trackCall is a call of a --track --json trace, the fields these tests
// read.
type trackCall struct {
	TS    uint64   `json:"ts"`
	Func  string   `json:"func"`
	Track string   `json:"track"`
	Flags []string `json:"flags"`
	Depth int      `json:"depth"`
}

// journeysOf parses --json output into journeys, by id, each in start
// order, failing the test on a call of no journey.
func journeysOf(t *testing.T, out string) map[string][]trackCall {
	t.Helper()
	journeys := map[string][]trackCall{}
	for line := range strings.Lines(out) {
		var c trackCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("not a JSON call: %q: %v", line, err)
		}
		if c.Track == "" {
			t.Errorf("a call of no journey: %s", line)
			continue
		}
		journeys[c.Track] = append(journeys[c.Track], c)
	}
	for _, calls := range journeys {
		slices.SortStableFunc(calls, func(a, b trackCall) int {
			if a.TS != b.TS {
				return int(int64(a.TS - b.TS))
			}
			return a.Depth - b.Depth
		})
	}
	return journeys
}

// trackLine is the summary's line of --track.
var trackLine = regexp.MustCompile(`trawl: --track: (\d+) journeys, (\d+) objects tracked: (\d+) freed, (\d+) expired, (\d+) evicted`)

// trackBackends are the backends of the guest's kernel that --track is
// tested with: the newest kprobe link, which takes thousands of functions
// (kprobe-session and kprobe-multi share the tracking code of the capture
// program). With classic set, the classic kprobes where the kernel has no
// kprobe link, on amd64-5.10 only: their programs keep their shadow stacks
// by thread id, and each is verified on its own, minutes under emulation.
func trackBackends(t *testing.T, classic bool) []string {
	have := backendsHere(t)
	for _, b := range []trawl.Backend{trawl.BackendKprobeSession, trawl.BackendKprobeMulti} {
		if slices.Contains(have, string(b)) {
			return []string{string(b)}
		}
	}
	if !classic {
		t.Skipf("no kprobe link on %s", guest.Kernel())
	}
	guest.Only(t, "--track with classic kprobes", "amd64-5.10")
	return []string{string(trawl.BackendKprobe)}
}

// index returns the position of the first call whose function f
// accepts, -1 for none.
func index(calls []trackCall, f func(name string) bool) int {
	return slices.IndexFunc(calls, func(c trackCall) bool { return f(c.Func) })
}

// journeyEnds returns the calls of a journey flagged as its end.
func journeyEnds(calls []trackCall) []trackCall {
	var ends []trackCall
	for _, c := range calls {
		if slices.Contains(c.Flags, "track_end") {
			ends = append(ends, c)
		}
	}
	return ends
}

// skbFrees are functions that free an sk_buff (lifeEnds in track.go).
var skbFrees = []string{"__kfree_skb", "kfree_skbmem", "__napi_kfree_skb", "napi_skb_cache_put", "kfree_skb_partial"}

// TestTrackSkb sends 1234 bytes over loopback TCP and tracks the skb of
// that length from __tcp_transmit_skb, with each kprobe backend: one
// journey goes from the sending side (ip_output, the *xmit* functions)
// through the clone TCP sends to the receiving side (*_rcv*) and ends
// with a free; no call outside it is shown.
func TestTrackSkb(t *testing.T) {
	guest.Require(t)
	const n = 1234
	for _, b := range trackBackends(t, false) {
		t.Run(b, func(t *testing.T) {
			cmd := trawlCmd("-q", "--json", "-b", b, "--track", "skb", "--filter", fmt.Sprintf("skb->len == %d", n),
				"/^(__tcp_transmit_skb|skb_clone|ip_output|ip_finish_output2|__dev_queue_xmit|dev_hard_start_xmit|loopback_xmit|ip_rcv|ip_local_deliver|tcp_v4_rcv|tcp_v4_do_rcv|tcp_rcv_established|tcp_queue_rcv)$/",
				"--", os.Args[0], tcpSendArg, strconv.Itoa(n))
			out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			t.Logf("%s", stderr)
			journeys := journeysOf(t, out)
			if len(journeys) != 1 {
				t.Fatalf("want one journey, got %d:\n%s", len(journeys), out)
			}
			for id, calls := range journeys {
				if calls[0].Func != "__tcp_transmit_skb" {
					t.Errorf("journey %s starts with %s, want __tcp_transmit_skb", id, calls[0].Func)
				}
				clone := index(calls, func(f string) bool { return f == "skb_clone" })
				send := index(calls, func(f string) bool { return f == "ip_output" || strings.Contains(f, "xmit") })
				recv := index(calls, func(f string) bool { return strings.Contains(f, "_rcv") })
				free := index(calls, func(f string) bool { return slices.Contains(skbFrees, f) })
				if clone < 0 || send < clone || recv < send || free < recv {
					t.Errorf("journey %s: want skb_clone (%d), then the sending side (%d), the receiving side (%d) and a free (%d):\n%s", id, clone, send, recv, free, out)
				}
				if ends := journeyEnds(calls); len(ends) != 1 {
					t.Errorf("journey %s: want one call flagged track_end, got %+v", id, ends)
				}
			}
			m := trackLine.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no --track line in the summary:\n%s", stderr)
			}
			if m[1] != "1" || m[2] != m[3] || m[5] != "0" {
				t.Errorf("want 1 journey whose objects were all freed, none evicted: %s", m[0])
			}
		})
	}
}

// TestTrackFile opens a file and tracks its struct file * from the open
// (security_file_open, once the file has its inode) to __fput, with each
// kprobe backend: one journey, ended by __fput.
func TestTrackFile(t *testing.T) {
	guest.Require(t)
	path, filter := trackedFile(t)
	for _, b := range trackBackends(t, true) {
		t.Run(b, func(t *testing.T) {
			cmd := trawlCmd("-q", "--json", "-b", b, "--track", "struct file *", "--filter", filter, fileFuncs,
				"--", os.Args[0], opensArg, path)
			out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			t.Logf("%s", stderr)
			journeys := journeysOf(t, out)
			if len(journeys) != 1 {
				t.Fatalf("want one journey, got %d:\n%s", len(journeys), out)
			}
			for id, calls := range journeys {
				if calls[0].Func != "security_file_open" {
					t.Errorf("journey %s starts with %s, want security_file_open:\n%s", id, calls[0].Func, out)
				}
				if fput := index(calls, func(f string) bool { return f == "__fput" }); fput < 0 {
					t.Errorf("journey %s has no __fput:\n%s", id, out)
				}
				if ends := journeyEnds(calls); len(ends) != 1 {
					t.Errorf("journey %s: want one call flagged track_end, got %+v", id, ends)
				}
			}
		})
	}
}

// fileFuncs are the functions a struct file * passes through from its open
// to its free, as a pattern.
const fileFuncs = "/^(security_file_open|fd_install|vfs_read|filp_flush|filp_close|fput|fput_close_sync|__fput)$/"

// trackedFile makes a file for the --track tests, and returns its path and
// the --filter that picks it by inode and device, as the kernel numbers
// them.
func trackedFile(t *testing.T) (string, string) {
	path := filepath.Join(t.TempDir(), "trawl-track-file")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	dev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	return path, fmt.Sprintf("file->f_inode->i_ino == %d && file->f_inode->i_sb->s_dev == %d", st.Ino, dev)
}

// readLaterArg as the first argument makes the test binary open the file
// named by the second, wait for the duration in the third, then read it
// and close it.
const readLaterArg = "__read_later"

func readLater(path string, d time.Duration) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	time.Sleep(d)
	_, err = f.Read(make([]byte, 1))
	return err
}

// TestTrackTimeout tracks a struct file * that no traced call receives for
// longer than --track-timeout: the read after the wait finds it expired.
// The read passes --filter, so the file is tracked again from there, in a
// new journey that its free ends: two journeys, two objects tracked, one
// expired, one freed.
func TestTrackTimeout(t *testing.T) {
	guest.Require(t)
	path, filter := trackedFile(t)
	b := trackBackends(t, false)[0] // the expiry is the capture program's, alike on each
	cmd := trawlCmd("-q", "--json", "-b", b, "--track", "struct file *", "--filter", filter,
		"--track-timeout", "1s", fileFuncs, "--", os.Args[0], readLaterArg, path, "3s")
	out, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	m := trackLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no --track line in the summary:\n%s", stderr)
	}
	if m[1] != "2" || m[2] != "2" || m[3] != "1" || m[4] != "1" || m[5] != "0" {
		t.Errorf("want 2 journeys, 2 objects tracked, 1 freed, 1 expired, 0 evicted: %s\n%s", m[0], out)
	}
}
