// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
	"github.com/trawl-dev/trawl/render"
)

// knownCalls are kernel functions the workload calls with known values,
// and what each call must decode to. Functions a kernel lacks are left
// out of that kernel's run.
var knownCalls = []struct {
	fn    string
	what  string
	check func(call map[string]any) error
}{
	{"bpf_fentry_test1", "int argument and return value", func(c map[string]any) error {
		return errors.Join(wantArg(c, "a", 1.0), wantRet(c, 2.0))
	}},
	{"bpf_fentry_test3", "char, int and u64 arguments", func(c map[string]any) error {
		return errors.Join(wantArg(c, "a", 4.0), wantArg(c, "b", 5.0), wantArg(c, "c", 6.0), wantRet(c, 15.0))
	}},
	{"bpf_fentry_test5", "short argument among five", func(c map[string]any) error {
		return errors.Join(wantArg(c, "a", 11.0), wantArg(c, "c", 13.0), wantArg(c, "e", 15.0))
	}},
	{"do_mmap", "more than six arguments (x86-64: the seventh on the stack)", func(c map[string]any) error {
		return errors.Join(wantArg(c, "len", float64(2*os.Getpagesize())), wantArg(c, "pgoff", 2.0))
	}},
	{"do_sys_openat2", "user string and a struct field behind a pointer", func(c map[string]any) error {
		how, _ := args(c)["how"].(map[string]any)
		return errors.Join(wantArg(c, "filename", openPath), want("how.mode", how["mode"], float64(0o640)))
	}},
	{"vfs_getxattr", "kernel string and an errno return", func(c map[string]any) error {
		err := wantArg(c, "name", "user.trawl")
		// tmpfs has user xattrs from 6.6; before, EOPNOTSUPP (alias ENOTSUP).
		switch c["errno"] {
		case "ENODATA", "EOPNOTSUPP", "ENOTSUP":
		default:
			err = errors.Join(err, fmt.Errorf("errno = %v, want ENODATA or EOPNOTSUPP", c["errno"]))
		}
		return err
	}},
	{"from_kuid_munged", "struct passed by value", func(c map[string]any) error {
		kuid, _ := args(c)["kuid"].(map[string]any)
		return errors.Join(want("kuid.val", kuid["val"], 4321.0), wantRet(c, 4321.0))
	}},
	{"vfs_write", "sized buffer: exactly the bytes written from a longer buffer; --depth 3: the inode two pointers in", func(c map[string]any) error {
		file, _ := args(c)["file"].(map[string]any)
		inode, _ := file["f_inode"].(map[string]any)
		return errors.Join(wantArg(c, "buf", "ping"), wantArg(c, "count", 4.0), want("file.f_inode.i_ino", inode["i_ino"], float64(pipeIno)))
	}},
	{"vfs_read", "sized buffer filled by the call: the bytes read, at exit; --show buf(buf, ret)", func(c map[string]any) error {
		show, _ := c["show"].(map[string]any)
		return errors.Join(wantArg(c, "buf", "ping"), wantArg(c, "count", 64.0), wantRet(c, 4.0), want("show "+showBuf, show[showBuf], "ping"))
	}},
	{"inet_csk_listen_start", "--show of the socket's local port", func(c map[string]any) error {
		show, _ := c["show"].(map[string]any)
		return want("show "+showPort, show[showPort], float64(listenPort))
	}},
	{"inet_stream_connect", "a socket address as address:port; --show formats two pointers in", func(c map[string]any) error {
		show, _ := c["show"].(map[string]any)
		return errors.Join(wantArg(c, "uaddr", fmt.Sprintf("127.0.0.1:%d", listenPort)),
			want("show "+showDport, show[showDport], float64(listenPort)),
			want("show "+showDaddr, show[showDaddr], "127.0.0.1"))
	}},
	{"kfree_skb_reason", "enum argument; the packet's 5-tuple", wantDropReason},
	{"sk_skb_reason_drop", "enum argument; the packet's 5-tuple", wantDropReason},
}

var openPath = "/tmp/trawl-capture-test"

// showPort, showDport and showDaddr are the --show expressions of
// TestCaptureKnownValues, and listenPort the port the workload listens on.
var (
	showPort   = "sk->__sk_common.skc_num"
	showDport  = "port(sock->sk->__sk_common.skc_dport)"
	showDaddr  = "ip(sock->sk->__sk_common.skc_daddr)"
	showBuf    = "buf(buf, ret)"
	listenPort int
	pipeIno    uint64 // the inode number of the pipe the workload writes to
)

func wantDropReason(c map[string]any) error {
	skb, _ := args(c)["skb"].(map[string]any)
	return errors.Join(wantArg(c, "reason", "SKB_DROP_REASON_NO_SOCKET"),
		want("skb.dst", skb["dst"], "127.0.0.1:9"), want("skb.proto", skb["proto"], "UDP"))
}

func args(c map[string]any) map[string]any {
	a, _ := c["args"].(map[string]any)
	return a
}

func want(what string, got, want any) error {
	if got != want {
		return fmt.Errorf("%s = %#v, want %#v", what, got, want)
	}
	return nil
}

func wantArg(c map[string]any, name string, v any) error { return want(name, args(c)[name], v) }

func wantRet(c map[string]any, v any) error { return want("ret", c["ret"], v) }

// knownPatterns returns the catalogue and the known functions this kernel
// has.
func knownPatterns(t *testing.T) (*kernel.Catalogue, []string) {
	t.Helper()
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	var patterns []string
	for _, k := range knownCalls {
		if len(cat.Lookup(k.fn)) > 0 {
			patterns = append(patterns, k.fn)
		}
	}
	return cat, patterns
}

func TestCaptureKnownValues(t *testing.T) {
	guest.Require(t)
	cat, patterns := knownPatterns(t)
	var have []string
	for _, b := range trawl.Backends[1:] { // all but auto
		if _, _, err := trawl.ChooseBackend(trawl.Config{Patterns: []string{"bpf_fentry_test1"}, Backend: b}); err != nil {
			t.Logf("%s: skipped on %s: %v", b, guest.Kernel(), err)
			continue
		}
		have = append(have, string(b))
	}
	have, notes := guest.NewestOfFamily(have)
	for _, n := range notes {
		t.Log(n)
	}
	for _, backend := range have {
		t.Run(backend, func(t *testing.T) {
			cfg := trawl.Config{Patterns: patterns, Backend: trawl.Backend(backend), PIDs: []int{os.Getpid()}, Show: []string{showPort, showDport, showDaddr, showBuf}}
			// --depth 3: structs two pointers in, shown whole.
			cfg.Capture.Depth, cfg.Decode.Depth, cfg.Decode.Full = 2, 3, true
			calls, skipped := capture(t, cfg)
			for _, k := range knownCalls {
				t.Run(k.fn, func(t *testing.T) {
					fns := cat.Lookup(k.fn)
					if len(fns) == 0 {
						t.Skipf("kernel %s has no %s", guest.Kernel(), k.fn)
					}
					if fns[0].Proto() == nil {
						// arm64-5.10: do_sys_openat2.
						t.Skipf("kernel %s has no BTF prototype of %s (%s): its arguments are raw registers", guest.Kernel(), k.fn, fns[0].ProtoNote)
					}
					if why := skipped[k.fn]; why != "" {
						t.Skipf("%s cannot attach to %s on %s: %s", backend, k.fn, guest.Kernel(), why)
					}
					got := calls[k.fn]
					if len(got) == 0 {
						t.Fatalf("no call of %s (%s) captured", k.fn, k.what)
					}
					// Other tasks of the test process call these too: one
					// call must be the workload's.
					var errs []error
					for _, c := range got {
						if err := ours(c); err != nil {
							t.Fatalf("call of %s: %v (%v)", k.fn, err, c)
						}
						err := k.check(c)
						if err == nil {
							return
						}
						errs = append(errs, err)
					}
					t.Errorf("no call of %s (%s) has the known values; last: %v (%v)", k.fn, k.what, errs[len(errs)-1], got[len(got)-1])
				})
			}
		})
	}
}

// TestCaptureDepthCut checks that a struct --depth reaches is marked cut
// when the per-call byte budget runs out: vfs_write captures the file
// (256 bytes) and the buffer (64), and 330 bytes leave no room for the
// file's inode.
func TestCaptureDepthCut(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "a struct cut by the per-call budget", "amd64-5.10")
	cfg := trawl.Config{Patterns: []string{"vfs_write"}, PIDs: []int{os.Getpid()}}
	cfg.Capture.Depth, cfg.Capture.CallBytes, cfg.Decode.Depth, cfg.Decode.Full = 2, 330, 3, true
	calls, _ := capture(t, cfg)
	for _, c := range calls["vfs_write"] {
		file, _ := args(c)["file"].(map[string]any)
		inode, _ := file["f_inode"].(map[string]any)
		if args(c)["buf"] == "ping" {
			if inode["$cut"] != true {
				t.Errorf("file.f_inode = %v, want {\"$cut\": true}", file["f_inode"])
			}
			return
		}
	}
	t.Errorf("no call of vfs_write wrote ping: %v", calls["vfs_write"])
}

// ours checks that call c has the ids and name of a thread of the test
// process, the only process traced: the program reads them in the kernel.
func ours(c map[string]any) error {
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		return err
	}
	if pid, _ := c["pid"].(float64); int(pid) != os.Getpid() {
		return fmt.Errorf("pid %v, want %d", c["pid"], os.Getpid())
	}
	if want := strings.TrimSpace(string(comm)); c["comm"] != want {
		return fmt.Errorf("comm %q, want %q", c["comm"], want)
	}
	if tid, _ := c["tid"].(float64); tid <= 0 {
		return fmt.Errorf("tid %v", c["tid"])
	} else if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", int(tid))); err != nil {
		return fmt.Errorf("tid %d is not a thread of this process: %w", int(tid), err)
	}
	return nil
}

// capture opens a session, runs the workload and returns the calls seen,
// as JSON objects by function, and the reason of each skipped function.
func capture(t *testing.T, cfg trawl.Config) (map[string][]map[string]any, map[string]string) {
	s, err := trawl.Open(t.Context(), cfg)
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel %s: %v", guest.Kernel(), err)
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	st, _ := s.Stats()
	t.Logf("%s: %d functions attached, skipped: %v", s.Backend, st.Attached, st.Skipped)
	workload(t)
	calls := readCalls(t, s, 2*time.Second)
	st, _ = s.Stats()
	t.Logf("stats: %+v", st)
	if st.CookieLookups != 0 {
		t.Errorf("the kprobe program found the function by its attach cookie %d times: the address table lacks the addresses bpf_get_func_ip gives", st.CookieLookups)
	}
	refusedByVerifier(t, st)
	skipped := map[string]string{}
	for reason, fns := range st.Skipped {
		for _, fn := range fns {
			skipped[fn] = reason
		}
	}
	return calls, skipped
}

// readCalls reads calls until none came for wait and returns them as
// their JSON objects, by function.
func readCalls(t *testing.T, s *trawl.Session, wait time.Duration) map[string][]map[string]any {
	t.Helper()
	var buf bytes.Buffer
	j := render.NewJSON(&buf, render.Options{})
	s.SetDeadline(time.Now().Add(wait))
	var c trawl.Call
	for {
		err := s.Read(t.Context(), &c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Call(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string][]map[string]any{}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		fn, _ := m["func"].(string)
		calls[fn] = append(calls[fn], m)
	}
	return calls
}

// workload calls each known function with known values.
func workload(t *testing.T) {
	// bpf_fentry_test1..8 run with fixed arguments when a tracing
	// program is test-run.
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTo: "bpf_fentry_test1",
		License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load test-run program: %v", err)
	}
	if _, err := prog.Run(&ebpf.RunOptions{}); err != nil {
		t.Errorf("test-run: %v", err)
	}
	prog.Close()

	// do_mmap: a file mapping of two pages at page offset 2.
	fd, err := unix.MemfdCreate("trawl", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	page := os.Getpagesize()
	unix.Ftruncate(fd, int64(4*page))
	if mem, err := unix.Mmap(fd, int64(2*page), 2*page, unix.PROT_READ, unix.MAP_SHARED); err == nil {
		unix.Munmap(mem)
	} else {
		t.Errorf("mmap: %v", err)
	}

	// do_sys_openat2 and from_kuid_munged (stat of a file owned by 4321).
	f, err := os.OpenFile(openPath, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Chown(openPath, 4321, 4322)
	os.Stat(openPath)
	defer os.Remove(openPath)

	// vfs_getxattr with a kernel copy of the name.
	buf := make([]byte, 16)
	unix.Getxattr(filepath.Clean(openPath), "user.trawl", buf)

	// vfs_write of 4 bytes of a longer buffer, and vfs_read of them into
	// a buffer of 64 holding other bytes.
	var pipe [2]int
	if err := unix.Pipe(pipe[:]); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(pipe[1], &st); err != nil {
		t.Fatal(err)
	}
	pipeIno = st.Ino
	unix.Write(pipe[1], []byte("pinghello from trawl\n")[:4])
	unix.Read(pipe[0], bytes.Repeat([]byte("X"), 64))
	unix.Close(pipe[0])
	unix.Close(pipe[1])

	// inet_csk_listen_start of a socket bound to a port the kernel picks.
	if l, err := net.Listen("tcp4", "127.0.0.1:0"); err == nil {
		listenPort = l.Addr().(*net.TCPAddr).Port
		// inet_stream_connect to it.
		if c, err := net.Dial("tcp4", l.Addr().String()); err == nil {
			c.Close()
		} else {
			t.Errorf("connect: %v", err)
		}
		l.Close()
	} else {
		t.Errorf("listen: %v", err)
	}

	// An skb dropped for want of a socket: UDP to a closed port.
	if c, err := net.Dial("udp", "127.0.0.1:9"); err == nil {
		c.Write([]byte("x"))
		c.Close()
	}
}

// refusedByVerifier fails the test for functions the verifier refused
// trawl's program for: a bug, not a function trawl cannot trace.
func refusedByVerifier(t *testing.T, st trawl.Stats) {
	t.Helper()
	for reason, fns := range st.Skipped {
		if strings.Contains(reason, "refused by the verifier") {
			t.Errorf("%d functions skipped, %s: %s", len(fns), reason, strings.Join(fns[:min(len(fns), 5)], ", "))
		}
	}
}

// TestModuleFunction traces a function of a module, 9pnet's
// p9_client_walk (the guest's work tree is a 9p share), with the
// trampoline backends that attach through their own loader, against the
// module's BTF: a lookup of a name the share lacks walks to it.
func TestModuleFunction(t *testing.T) {
	guest.Require(t)
	for _, backend := range []trawl.Backend{trawl.BackendFsession, trawl.BackendTracingMulti} {
		t.Run(string(backend), func(t *testing.T) {
			s, err := trawl.Open(t.Context(), trawl.Config{Patterns: []string{"9pnet:p9_client_walk"}, Backend: backend, PIDs: []int{os.Getpid()}})
			if errors.Is(err, ebpf.ErrNotSupported) {
				t.Skipf("kernel %s: %v", guest.Kernel(), err)
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer s.Close()
			if st, _ := s.Stats(); st.Attached != 1 {
				t.Fatalf("%d functions attached, skipped: %v", st.Attached, st.Skipped)
			}
			name := fmt.Sprintf("trawl-no-such-file-%d-%s", os.Getpid(), backend)
			if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("stat %s: %v, want not found", name, err)
			}
			calls := readCalls(t, s, 2*time.Second)["p9_client_walk"]
			for _, c := range calls {
				if c["module"] == "9pnet" && args(c)["nwname"] == 1.0 {
					return
				}
			}
			t.Errorf("no call of 9pnet's p9_client_walk walking one name: %v", calls)
		})
	}
}
