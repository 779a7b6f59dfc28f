// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"image"
	"image/draw"
	"image/png"
	"iter"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// The browser of TestReportHTMLBrowser is Debian's chromium-headless-shell
// (built from the chromium sources): Chromium's renderer without the
// browser's own services. The full chromium calls Google as it starts
// (sign-in's account list, the component updater, the network clock),
// whatever page it opens, so a proxy could not tell the page's requests
// from the browser's; the shell sends none of its own.
const headlessShell = "chromium-headless-shell"

// artefactsEnv names a directory where TestReportHTMLBrowser keeps its
// screenshot of the page; without it the screenshot goes to the test's
// temporary directory, removed at its end.
const artefactsEnv = "TRAWL_ARTEFACTS"

// TestReportHTMLBrowser opens the page of trawl report -f html in headless
// Chromium: the function table and the flame graph are there with or
// without JavaScript, a click on a column sorts the table, no script
// fails and the page sends no request, which a proxy the test owns would
// receive. It keeps a screenshot of the page, and checks the flame
// graph's frames are painted in it.
func TestReportHTMLBrowser(t *testing.T) {
	guest.HostOnly(t)
	shell, err := exec.LookPath(headlessShell)
	if err != nil {
		t.Skipf("needs headless Chromium: %v (Debian: apt-get install %s; make test installs it)", err, headlessShell)
	}
	dir := t.TempDir()
	calls := browserCalls()
	page := filepath.Join(dir, "report.html")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"report", "-f", "html", "-o", page, recording(t, dir, calls...)}, &stdout, &stderr); err != nil {
		t.Fatalf("trawl report: %v\n%s", err, stderr.String())
	}
	source, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9]`).Find(source); url != nil {
		t.Errorf("the page refers to %q", url)
	}
	b := &browser{path: shell, proxy: newProxy(t), dir: dir}

	// The detectors first: a page that fetches an image and throws.
	bad := filepath.Join(dir, "bad.html")
	if err := os.WriteFile(bad, []byte(`<!DOCTYPE html><img src="http://trawl.invalid/x.png"><script>null.x</script>`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, console := b.open(t, bad, "--dump-dom")
	if got := b.proxy.take(t); len(got) == 0 {
		t.Error("the proxy saw no request from a page that loads an image from the network: it cannot see the report's")
	}
	if !strings.Contains(console, "Uncaught") {
		t.Errorf("the console shows no uncaught error from a page that throws one:\n%s", console)
	}

	want := tableOf(calls)
	byCalls := func(a, b tableRow) int { return cmp.Or(cmp.Compare(b.calls, a.calls), strings.Compare(a.name, b.name)) }
	byErrors := func(a, b tableRow) int { return cmp.Compare(b.errors, a.errors) }
	if slices.IsSortedFunc(slices.SortedFunc(slices.Values(want), byCalls), byErrors) {
		t.Fatal("the recording's functions have the same order by errors as by calls: a sort would not show")
	}
	t.Run("without JavaScript", func(t *testing.T) {
		// The page's scripts are refused; the browser's dump still runs.
		dom, console := b.open(t, edit(t, page, "<head>", `<head><meta http-equiv="Content-Security-Policy" content="script-src 'none'">`), "--dump-dom")
		if !strings.Contains(console, "Content Security Policy") {
			t.Errorf("the page's scripts were not refused:\n%s", console)
		}
		checkTable(t, dom, want, byCalls)
		checkHistograms(t, dom, want)
		checkFlame(t, dom, calls)
	})
	t.Run("sorted by errors", func(t *testing.T) {
		// A click on the errors column, once the page's script ran.
		dom, console := b.open(t, edit(t, page, "</body>", `<script>document.querySelector("#funcs th:nth-child(3)").click()</script></body>`), "--dump-dom")
		if strings.Contains(console, "Uncaught") {
			t.Errorf("a script of the page failed:\n%s", console)
		}
		checkTable(t, dom, want, byErrors)
		checkFlame(t, dom, calls)
	})
	t.Run("screenshot", func(t *testing.T) {
		shots := os.Getenv(artefactsEnv)
		if shots == "" {
			shots = t.TempDir()
		} else if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(shots, "html-report.png")
		b.open(t, page, "--screenshot="+shot, "--window-size=1280,900", "--hide-scrollbars")
		t.Logf("screenshot of the page: %s (%s=DIR keeps it)", shot, artefactsEnv)
		checkPainted(t, shot)
	})
	if got := b.proxy.take(t); len(got) > 0 {
		t.Errorf("the page sent requests through the proxy: %q", got)
	}
}

// browserCalls is a recording of a few seconds of a busy machine: six
// functions of files, sockets and memory, some failing, each called
// through its system call's stack.
func browserCalls() []call.Call {
	entry := []string{"do_syscall_64+0x82", "entry_SYSCALL_64_after_hwframe+0x76"}
	stack := func(frames ...string) []string { return append(frames, entry...) }
	funcs := []struct {
		name   string
		calls  int
		errno  string
		failed float64 // the share of the calls that fail
		median float64 // ns
		comm   string
		stack  []string
	}{
		{"vfs_read", 900, "EAGAIN", 0.02, 1500, "nginx", stack("vfs_read+0x0", "ksys_read+0x6b")},
		{"vfs_write", 600, "", 0, 4000, "nginx", stack("vfs_write+0x0", "ksys_write+0x6b")},
		{"do_sys_openat2", 300, "ENOENT", 0.4, 9000, "make", stack("do_sys_openat2+0x0", "__x64_sys_openat+0x55")},
		{"tcp_sendmsg", 200, "EPIPE", 0.01, 12000, "curl", stack("tcp_sendmsg+0x0", "sock_sendmsg+0x5f", "__sys_sendto+0x10e", "__x64_sys_sendto+0x24")},
		{"tcp_recvmsg", 150, "EAGAIN", 0.6, 3000, "curl", stack("tcp_recvmsg+0x0", "inet_recvmsg+0x5e", "sock_recvmsg+0x7c", "__sys_recvfrom+0xa6", "__x64_sys_recvfrom+0x24")},
		{"do_mmap", 80, "ENOMEM", 0.05, 20000, "make", stack("do_mmap+0x0", "vm_mmap_pgoff+0xd4", "ksys_mmap_pgoff+0x15d")},
	}
	errnos := map[string]uint64{"EAGAIN": 11, "ENOENT": 2, "EPIPE": 32, "ENOMEM": 12}
	r := rand.New(rand.NewPCG(1, 2))
	var calls []call.Call
	ts := uint64(1_000_000_000)
	for i, f := range funcs {
		for range f.calls {
			ts += 1000 + r.Uint64N(3_000_000)
			c := call.Call{TS: ts, Duration: uint64(f.median * (0.3 + r.ExpFloat64())), CPU: uint32(r.IntN(4)),
				PID: uint32(4000 + 100*i), TID: uint32(4000 + 100*i + r.IntN(4)), Comm: f.comm, Func: f.name,
				Ret: call.Value{Kind: call.KindInt, Bits: uint64(r.IntN(4096))}, Stack: f.stack}
			if r.Float64() < f.failed {
				c.Ret = call.Value{Kind: call.KindErrno, Bits: -errnos[f.errno], Str: f.errno}
			}
			calls = append(calls, c)
		}
	}
	r.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	return calls
}

// tableRow is a function's row of the page's table.
type tableRow struct {
	name          string
	calls, errors uint64
}

// tableOf counts the calls and errors of each function of calls.
func tableOf(calls []call.Call) []tableRow {
	rows := map[string]*tableRow{}
	for _, c := range calls {
		r := rows[c.Func]
		if r == nil {
			r = &tableRow{name: c.Func}
			rows[c.Func] = r
		}
		r.calls++
		if c.Ret.Kind == call.KindErrno {
			r.errors++
		}
	}
	var table []tableRow
	for _, r := range rows {
		table = append(table, *r)
	}
	return table
}

// checkTable checks the rows of the function table of dom are those of
// want, in the order of sorted.
func checkTable(t *testing.T, dom *html.Node, want []tableRow, sorted func(a, b tableRow) int) {
	t.Helper()
	var got []tableRow
	for tr := range descendants(find(dom, "table", "id", "funcs"), "tr") {
		cells := slices.Collect(descendants(tr, "td"))
		if len(cells) == 0 {
			continue // the header
		}
		if len(cells) != 7 {
			t.Errorf("a row of the table has %d cells, want 7: %q", len(cells), text(tr))
			continue
		}
		row := tableRow{name: text(cells[0])}
		row.calls, _ = strconv.ParseUint(text(cells[1]), 10, 64)
		row.errors, _ = strconv.ParseUint(text(cells[2]), 10, 64)
		got = append(got, row)
	}
	byName := func(a, b tableRow) int { return strings.Compare(a.name, b.name) }
	if !slices.Equal(slices.SortedFunc(slices.Values(got), byName), slices.SortedFunc(slices.Values(want), byName)) || !slices.IsSortedFunc(got, sorted) {
		t.Errorf("the function table has\n%v\nwant, sorted otherwise\n%v", got, want)
	}
}

// checkHistograms checks each function of want has a latency histogram
// whose bars count its calls, all of which have a duration.
func checkHistograms(t *testing.T, dom *html.Node, want []tableRow) {
	t.Helper()
	got := map[string]uint64{}
	bar := regexp.MustCompile(`^\[.+, .+\): (\d+) calls$`)
	for d := range descendants(dom, "details") {
		name := text(find(d, "summary", "", ""))
		for g := range descendants(find(d, "svg", "", ""), "g") {
			m := bar.FindStringSubmatch(text(find(g, "title", "", "")))
			if m == nil || find(g, "rect", "", "") == nil {
				t.Errorf("a bar of the histogram of %s is %q", name, text(g))
				continue
			}
			n, _ := strconv.ParseUint(m[1], 10, 64)
			got[name] += n
		}
	}
	for _, r := range want {
		if got[r.name] != r.calls {
			t.Errorf("the latency histogram of %s counts %d calls, want %d", r.name, got[r.name], r.calls)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the page has histograms of %v, want %v", got, want)
	}
}

// checkFlame checks the flame graph of dom has a frame for each function
// and caller of the calls' stacks, the calls through a frame summing up to
// the calls whose stack has it.
func checkFlame(t *testing.T, dom *html.Node, calls []call.Call) {
	t.Helper()
	want := map[string]uint64{"all": uint64(len(calls))}
	for _, c := range calls {
		for _, f := range c.Stack {
			want[strings.Split(f, "+")[0]]++
		}
	}
	var svg *html.Node
	for n := range descendants(dom, "svg") {
		svg = n // the flame graph comes last, after the histograms
	}
	if svg == nil {
		t.Fatal("the page has no drawing")
	}
	got := map[string]uint64{}
	title := regexp.MustCompile(`^(.+): (\d+) calls, [0-9.]+%$`)
	for g := range descendants(svg, "g") {
		m := title.FindStringSubmatch(text(find(g, "title", "", "")))
		rect := find(g, "rect", "", "")
		if m == nil || rect == nil {
			t.Errorf("a frame of the flame graph is %q", text(g))
			continue
		}
		if w, err := strconv.ParseFloat(attr(rect, "width"), 64); err != nil || w < 1 {
			t.Errorf("frame %s is %q pixels wide", m[1], attr(rect, "width"))
		}
		n, _ := strconv.ParseUint(m[2], 10, 64)
		got[m[1]] += n
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("the flame graph's frames of %s count %d calls, want %d", name, got[name], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the flame graph has frames %v, want %v", got, want)
	}
}

// checkPainted checks the screenshot at path shows the flame graph: at
// least a frame's width of pixels in the frames' colours (render's
// frameColor: red 205-254, green 80-199, blue 30-79).
func checkPainted(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	warm := 0
	for p := range slices.Chunk(rgba.Pix, 4) {
		if r, g, b := p[0], p[1], p[2]; r >= 205 && g >= 80 && g < 200 && b >= 30 && b < 80 {
			warm++
		}
	}
	if frame := 1200 * 17; warm < frame {
		t.Errorf("the screenshot has %d pixels in the flame graph's colours, want at least a frame's %d", warm, frame)
	}
}

// edit writes a copy of the page at path with its first old replaced by
// new, and returns the copy's path.
func edit(t *testing.T, path, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("the page has no %s", old)
	}
	edited := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(edited, bytes.Replace(b, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	return edited
}

// browser runs headless Chromium on pages, its requests sent to proxy.
type browser struct {
	path  string
	proxy *proxy
	dir   string
}

// open loads the page at path with the flags given and returns the DOM
// it dumps, if asked (--dump-dom), and the console's messages.
func (b *browser) open(t *testing.T, path string, flags ...string) (*html.Node, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{
		"--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(b.dir, "profile"),
		// Every request goes to the proxy, also those to this machine.
		"--proxy-server=http://" + b.proxy.addr, "--proxy-bypass-list=<-loopback>",
		// Scripts run to their end; the console is logged on stderr.
		"--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
	}, flags...)
	cmd := exec.CommandContext(ctx, b.path, append(args, "file://"+path)...)
	// What it keeps of its own stays in the test's directory.
	cmd.Env = append(os.Environ(), "HOME="+b.dir, "XDG_CONFIG_HOME="+filepath.Join(b.dir, ".config"), "XDG_CACHE_HOME="+filepath.Join(b.dir, ".cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", b.path, err, stderr.String())
	}
	var console []string
	for line := range strings.Lines(stderr.String()) {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	dom, err := html.Parse(&stdout)
	if err != nil {
		t.Fatalf("the DOM %s dumped: %v", b.path, err)
	}
	return dom, strings.Join(console, "")
}

// proxy is a listener in place of a proxy that records the first line
// of each request it gets.
type proxy struct {
	addr     string
	mu       sync.Mutex
	requests []request
}

// request is what the proxy got on a connection.
type request struct {
	from, line string
}

func newProxy(t *testing.T) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &proxy{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			p.mu.Lock()
			p.requests = append(p.requests, request{from: c.RemoteAddr().String(), line: strings.TrimSpace(line)})
			p.mu.Unlock()
		}
	}()
	return p
}

// take returns the requests received so far and forgets them. It knows
// it has them all when it gets its own, sent after them.
func (p *proxy) take(t *testing.T) []string {
	t.Helper()
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("the test's own\r\n")); err != nil {
		t.Fatal(err)
	}
	me := c.LocalAddr().String()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		p.mu.Lock()
		i := slices.IndexFunc(p.requests, func(r request) bool { return r.from == me })
		var got []string
		if i >= 0 {
			for _, r := range p.requests[:i] {
				got = append(got, r.line)
			}
			p.requests = p.requests[i+1:]
		}
		p.mu.Unlock()
		if i >= 0 {
			return got
		}
	}
	t.Fatal("the proxy did not get the test's own request")
	return nil
}

// descendants yields the elements named tag under n, in document order.
func descendants(n *html.Node, tag string) iter.Seq[*html.Node] {
	return func(yield func(*html.Node) bool) {
		if n == nil {
			return
		}
		for d := range n.Descendants() {
			if d.Type == html.ElementNode && d.Data == tag && !yield(d) {
				return
			}
		}
	}
}

// find returns the first element named tag under n whose attribute key
// is val (any with key ""), or nil.
func find(n *html.Node, tag, key, val string) *html.Node {
	for d := range descendants(n, tag) {
		if key == "" || attr(d, key) == val {
			return d
		}
	}
	return nil
}

// attr returns the attribute key of n.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text returns the text under n, trimmed.
func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.TrimSpace(b.String())
}
