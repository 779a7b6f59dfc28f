// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/metrics"
	"github.com/trawl-dev/trawl/otlp"
	"github.com/trawl-dev/trawl/render"
)

// traceFlags are the flags of the tracing command.
type traceFlags struct {
	noCache     bool
	backend     string
	btf         btfFlags
	pids        pidList
	buffers     bufferList
	show        []string
	cgroupExact bool
	comm        commName
	cgroup      string
	minDur      time.Duration
	errors      bool
	entries     []string
	errnos      string
	stack       stackKind
	stackCounts int
	filter      string
	track       string
	trackFor    time.Duration
	trackObjs   int
	duration    time.Duration
	format      string
	json        bool
	tree        bool
	perfetto    string
	stats       bool
	interval    time.Duration
	sortBy      string
	hist        string
	listen      string
	otlp        string
	otlpValues  string
	otlpLimit   int
	maxSeries   int
	pprof       bool
	output      string
	depth       int
	maxBytes    int
	callBytes   int
	full        bool
	workload    bool
	user        string
	cred        *credential // -u's user, once validate resolved it
	color       string
	quiet       bool
	ringBuffer  byteSize
	version     bool
	debug       bool // --debug, a flag of every command
	// set holds the names of the flags given on the command line.
	set map[string]bool
}

// Output formats of --format.
const (
	formatText       = "text"
	formatTree       = "tree"
	formatJSON       = "json"
	formatPerfetto   = "perfetto"
	formatChromeJSON = "chrome-json"
	formatStats      = "stats"
	formatFolded     = "folded"
	formatHTML       = "html"
)

var (
	formats = []string{formatText, formatTree, formatJSON, formatPerfetto, formatChromeJSON, formatStats, formatFolded, formatHTML}
	colors  = []string{"auto", "always", "never"}
	// valueLevels are the values of --otlp-values: otlp.ValueLevels.
	valueLevels = func() (names []string) {
		for _, l := range otlp.ValueLevels {
			names = append(names, string(l))
		}
		return names
	}()
	// backends are the values of --backend: trawl.Backends.
	backends = func() (names []string) {
		for _, b := range trawl.Backends {
			names = append(names, string(b))
		}
		return names
	}()
)

// register defines the flags on the tracing command, with the completion
// of their values.
func (f *traceFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.SortFlags = false
	// What to trace.
	fs.VarP(&f.pids, "pid", "p", "trace only process `PID` and its children (repeatable, or a comma-separated list: -p 100,200)")
	fs.Var(&f.comm, "comm", "trace only tasks named `NAME` (one name)")
	fs.StringVar(&f.cgroup, "cgroup", "", "trace only tasks in the cgroup v2 directory `PATH` and its descendants")
	fs.BoolVar(&f.cgroupExact, "cgroup-exact", false, "with --cgroup, trace only tasks in that cgroup, not in its descendants")
	fs.BoolVar(&f.workload, "workload", false, "trace trawl's small built-in workload (files, pipes, loopback TCP) as the command")
	fs.StringVarP(&f.user, "user", "u", "", "run the command as `USER` (a name, or a numeric UID[:GID]): its uid, gid and groups, with HOME, USER and LOGNAME set (default: as trawl's user, root)")
	fs.StringVarP(&f.backend, "backend", "b", string(trawl.BackendAuto), "attach with `BACKEND`: "+strings.Join(backends, ", ")+" (trawl features PATTERN... shows what auto picks)")
	fs.VarP((*durationOrSeconds)(&f.duration), "duration", "d", "stop `D` after tracing begins: a duration, e.g. 10s or 1m30s, or a number of seconds, e.g. 5 (default: at Ctrl-C, or when the command exits)")
	// Which calls to keep.
	fs.DurationVar(&f.minDur, "min-duration", 0, "show only calls that take at least `D` (e.g. 1ms)")
	fs.StringArrayVarP(&f.entries, "entry", "e", nil, "trace the functions only inside calls of the functions `PATTERN` selects, which are traced too (repeatable); with --errors, show only the error chains of entry calls that fail")
	fs.BoolVar(&f.errors, "errors", false, "show only calls that return an error (negative errno, NULL or ERR_PTR)")
	fs.StringVar(&f.errnos, "errno", "", "with --errors, keep only these errors, e.g. ENOENT,EINVAL, or with a leading ! all but these, e.g. '!EAGAIN' (with --entry: the entry call's error)")
	fs.StringVar(&f.filter, "filter", "", "show only calls for which `EXPR` holds, e.g. 'skb->len > 1000 && ret < 0' or 'filename ~ \"/tmp/*\"' (docs/filter.md)")
	fs.StringVar(&f.track, "track", "", "follow the objects of pointer type `TYPE` ('struct sk_buff *', or an argument name such as skb) that calls passing the filters receive: show every call that receives one, filter or not, grouped by journey, through clones to the free that ends it, and no other call (docs/track.md)")
	fs.DurationVar(&f.trackFor, "track-timeout", 0, "with --track, stop tracking an object no traced call received for `D` (default: until it is freed)")
	fs.IntVar(&f.trackObjs, "track-objects", 0, "with --track, track at most `N` objects at once, the least recently seen forgotten first (default 16384)")
	fs.StringArrayVar(&f.show, "show", nil, "show the value of `EXPR` with each call, read when it returns, e.g. 'file->f_path.dentry->d_name.name' or 'port(sk->__sk_common.skc_dport)' (formats ip, ipv6, port, hex, str, and buf(PTR, LEN); repeatable, up to 8; docs/filter.md)")
	// How to write them.
	fs.Var(&f.stack, "stack", "show each call's stacks: `WHICH` is kernel (its kernel stack at its entry; of an error chain, the origin's), user (its task's user stack, by frame pointers) or both, what --stack alone takes; a value goes after an equals sign, --stack=user")
	fs.Lookup("stack").NoOptDefVal = stackBoth
	fs.IntVar(&f.stackCounts, "stack-counts", 0, "with --stats -f folded --stack, count the calls under at most `N` distinct stacks (a function, its stacks and, with a user stack, its process) at about 100 bytes of kernel memory each (default 65536): the calls under others count as [stack-not-counted]")
	fs.StringVarP(&f.format, "format", "f", formatText, "write `FORMAT`: text (a line per call), tree (a call tree per task), json (a JSON object per call), perfetto (Perfetto's protobuf trace, needs -o), chrome-json (the Chrome JSON trace), stats (counts, errors, latency percentiles), folded (call counts by stack for flame graphs, at the end: with --stack, the traced function under its callers; without, the function alone; with --stats, counted in the kernel), html (a page written at the end: a table of the functions, their latency histograms and a flame graph of the stacks)")
	fs.StringVarP(&f.output, "output", "o", "", "write to `FILE` instead of standard output")
	fs.BoolVar(&f.json, "json", false, "same as --format json (schema: docs/json-schema.md)")
	fs.BoolVar(&f.tree, "tree", false, "same as --format tree")
	fs.StringVar(&f.perfetto, "perfetto", "", "same as --format perfetto -o `FILE`")
	fs.BoolVar(&f.stats, "stats", false, "same as --format stats; with -f folded, count the calls by stack in the kernel, none lost at any rate")
	fs.DurationVar(&f.interval, "interval", 0, "with --format stats, refresh the table every `D`")
	fs.StringVar(&f.sortBy, "sort", "count", "with --format stats, sort by `COLUMN`: "+strings.Join(render.SortColumns, ", "))
	fs.StringVar(&f.hist, "hist", "", "with --format stats, show the latency histogram of `FUNC`")
	fs.StringVar(&f.listen, "listen", "", "with --stats, serve Prometheus metrics of the counts at http://`ADDR`/metrics (and /healthz) until stopped; ADDR is HOST:PORT, or :PORT for 127.0.0.1")
	fs.StringVar(&f.otlp, "otlp", "", "export to the OpenTelemetry collector at `URL` (grpc://HOST:PORT, grpcs://, http://HOST:PORT[/PREFIX] or https://): each call as a span, or with --stats the counts as metrics every --interval (default 10s); calls are then written out only with -f or -o")
	fs.StringVar(&f.otlpValues, "otlp-values", string(otlp.ValuesNames), fmt.Sprintf("with --otlp, the values of arguments, --show and returns that the spans carry, `LEVEL`: none, all (buffers, structs and addresses included), or names: numbers, enumerator and symbol names, NULL and strings cut to %d bytes, but no buffer, raw bytes, struct, array or kernel address", otlp.NamesStringLimit))
	fs.IntVar(&f.otlpLimit, "otlp-attribute-limit", otlp.DefaultAttributeLimit, fmt.Sprintf("with --otlp, cut each string attribute of a span to `N` bytes, at least %d: a value cut ends in \"...\" and is counted in the summary", otlp.MinAttributeLimit))
	fs.IntVar(&f.maxSeries, "max-series", metrics.DefaultMaxSeries, "with --listen or --otlp, give at most `N` functions series of their own; the calls of the others add up under function=\"_other\"")
	fs.BoolVar(&f.pprof, "pprof", false, "with --listen, also serve Go's profiles under /debug/pprof/")
	fs.IntVar(&f.depth, "depth", 0, fmt.Sprintf("show `N` levels of nested structs, 1 to %d (default 2), and capture the structs pointers lead to N-1 pointers deep: from 3, the structs the arguments' structs point to (within --call-bytes)", trawl.MaxDepth))
	fs.IntVar(&f.callBytes, "call-bytes", 0, fmt.Sprintf("with --depth 3 or more, capture at most `N` bytes of memory per call, 1 to %d (default %[1]d): the arguments' memory counts first, and the structs --depth reaches that do not fit are marked <cut>", trawl.MaxCallBytes))
	fs.IntVar(&f.maxBytes, "max-bytes", 0, fmt.Sprintf("capture sized buffers and show strings up to `N` bytes long, 1 to %d (default 64)", trawl.MaxBytes))
	fs.Var(&f.buffers, "buf", "capture argument ARG of FUNC as a buffer of SIZEARG bytes, written `FUNC:ARG=SIZEARG` (repeatable; common pairs such as buf/count are found by name, docs/buffers.md)")
	fs.BoolVar(&f.full, "full", false, "show every struct member and array element")
	fs.StringVar(&f.color, "color", "auto", "colour the text: `WHEN` is auto (on a terminal, unless NO_COLOR is set), always or never")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress or notices on standard error, only errors and the summary at the end")
	f.ringBuffer = trawl.DefaultRingBufferSize
	fs.Var(&f.ringBuffer, "ring-buffer-size", "size of the ring buffer the calls go through: a power of two number of pages, in bytes, or with K, M or G")
	fs.BoolVar(&f.noCache, "no-cache", false, noCacheUsage)
	fs.BoolVarP(&f.version, "version", "V", false, "print trawl's version, commit, Go release and BPF program hash, and exit")

	for name, values := range map[string][]string{"backend": backends, "format": formats, "sort": render.SortColumns, "color": colors, "otlp-values": valueLevels} {
		cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	cmd.RegisterFlagCompletionFunc("hist", completeFunctions)
	cmd.RegisterFlagCompletionFunc("entry", completeFunctions)
	cmd.MarkFlagDirname("cgroup")
	f.btf.register(cmd)
}

// parsePID parses a process id: a positive decimal no larger than the
// kernel's pid_max.
func parsePID(s string) (int, error) {
	pid, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a process id: %q", s)
	}
	if pid <= 0 || pid > pidMax() {
		return 0, fmt.Errorf("process id %d out of range (1 to %d)", pid, pidMax())
	}
	return int(pid), nil
}

// validate refuses flag combinations and values that cannot work, before
// anything is opened, loaded or written.
func (f *traceFlags) validate(command []string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	if f.workload && len(command) > 0 {
		return bad("--workload and a command cannot go together")
	}
	if len(f.pids) > 0 && (len(command) > 0 || f.workload) {
		return bad("-p and a command cannot go together")
	}
	if f.set["user"] {
		if len(command) == 0 && !f.workload {
			return bad("-u needs a command to run")
		}
		cred, err := lookupUser(f.user)
		if err != nil {
			return bad("-u %s: %v", f.user, err)
		}
		f.cred = cred
	}
	for _, pid := range f.pids {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return bad("-p %d: no such process", pid)
		}
	}
	if f.set["duration"] && f.duration <= 0 {
		return bad("--duration must be positive, got %v", f.duration)
	}
	if f.set["interval"] && f.interval <= 0 {
		return bad("--interval must be positive, got %v", f.interval)
	}
	// 0 means the default in trawl.Config, which checks the upper bounds.
	if f.set["depth"] && f.depth < 1 {
		return bad("--depth must be 1 to %d, got %d", trawl.MaxDepth, f.depth)
	}
	if f.set["call-bytes"] && f.callBytes < 1 {
		return bad("--call-bytes must be 1 to %d, got %d", trawl.MaxCallBytes, f.callBytes)
	}
	if f.set["max-bytes"] && f.maxBytes < 1 {
		return bad("--max-bytes must be 1 to %d, got %d", trawl.MaxBytes, f.maxBytes)
	}
	for _, name := range []string{"track-timeout", "track-objects"} {
		if f.set[name] && f.track == "" {
			return bad("--%s needs --track", name)
		}
	}
	if f.set["track-timeout"] && f.trackFor <= 0 {
		return bad("--track-timeout must be positive, got %v", f.trackFor)
	}
	if f.set["track-objects"] && f.trackObjs < 1 {
		return bad("--track-objects must be at least 1, got %d", f.trackObjs)
	}
	if _, _, err := parseErrnos(f.errnos); err != nil {
		return bad("--errno: %v", err)
	}
	n := 0
	// --stats -f folded counts the calls by stack in the kernel.
	foldedStats := f.stats && f.set["format"] && f.format == formatFolded
	for _, set := range []bool{f.set["format"] && !foldedStats, f.json, f.tree, f.perfetto != "", f.stats} {
		if set {
			n++
		}
	}
	if n > 1 {
		return bad("choose one of --format, --json, --tree, --perfetto and --stats (--stats goes with -f folded alone)")
	}
	if !slices.Contains(formats, f.format) {
		return bad("--format %q: want one of %s", f.format, strings.Join(formats, ", "))
	}
	for _, name := range []string{"interval", "sort", "hist"} {
		switch {
		case f.set[name] && foldedStats:
			return bad("--%s goes with the table of --stats, not -f folded", name)
		case f.set[name] && f.outputFormat() != formatStats:
			return bad("--%s needs --stats (or --format stats)", name)
		}
	}
	if f.set["listen"] && !f.aggregate() {
		return bad("--listen needs --stats (or --format stats)")
	}
	if f.set["stack"] && f.outputFormat() == formatStats {
		return bad("--stack with --stats counts the calls by stack for a flame graph: add -f folded")
	}
	if f.set["stack-counts"] && (!foldedStats || !f.set["stack"]) {
		return bad("--stack-counts needs --stats -f folded --stack")
	}
	if f.set["stack-counts"] && f.stackCounts < 1 {
		return bad("--stack-counts must be at least 1, got %d", f.stackCounts)
	}
	if f.set["pprof"] && f.listen == "" {
		return bad("--pprof needs --listen")
	}
	if f.set["max-series"] && f.listen == "" && f.otlp == "" {
		return bad("--max-series needs --listen or --otlp")
	}
	if f.otlp != "" {
		if err := otlp.CheckURL(f.otlp); err != nil {
			return bad("--otlp: %v", err)
		}
	}
	for _, name := range []string{"otlp-values", "otlp-attribute-limit"} {
		switch {
		case f.set[name] && f.otlp == "":
			return bad("--%s needs --otlp", name)
		case f.set[name] && f.aggregate():
			return bad("--%s shapes the spans: with --stats, --otlp exports metrics, which carry no values", name)
		}
	}
	if !slices.Contains(valueLevels, f.otlpValues) {
		return bad("--otlp-values %q: want one of %s", f.otlpValues, strings.Join(valueLevels, ", "))
	}
	if f.otlpLimit < otlp.MinAttributeLimit {
		return bad("--otlp-attribute-limit must be at least %d, got %d", otlp.MinAttributeLimit, f.otlpLimit)
	}
	if f.maxSeries < 1 {
		return bad("--max-series %d: want at least 1", f.maxSeries)
	}
	if f.listen != "" {
		_, port, err := net.SplitHostPort(f.listen)
		if err == nil {
			_, err = net.LookupPort("tcp", port)
		}
		if err != nil {
			return bad("--listen %q: want HOST:PORT or :PORT, a port from 0 to 65535", f.listen)
		}
	}
	if f.set["sort"] && !slices.Contains(render.SortColumns, f.sortBy) {
		return bad("--sort %q: want one of %s", f.sortBy, strings.Join(render.SortColumns, ", "))
	}
	if f.perfetto != "" && f.output != "" {
		return bad("--perfetto names its own file: -o cannot go with it")
	}
	if f.format == formatPerfetto && f.output == "" {
		return bad("--format perfetto writes a binary trace: name its file with -o FILE")
	}
	if !slices.Contains(colors, f.color) {
		return bad("--color %q: want one of %s", f.color, strings.Join(colors, ", "))
	}
	for _, path := range []string{f.output, f.perfetto} {
		if err := checkWritable(path); err != nil {
			return err
		}
	}
	return nil
}

// checkWritable checks that path ("" for none) can be created or
// overwritten, without touching it. trawl runs as root in directories
// others can write to, such as /tmp: it refuses to write through a
// symbolic link, to anything but a regular file, and to a file another
// user owns, so that a link or file planted there cannot make it
// overwrite what it points to. openOutput checks the same again as it
// opens the file.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Lstat(path); err == nil {
		if err := checkOutput(path, fi); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		if err := syscall.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		return nil
	}
	dir := filepath.Dir(path)
	if err := syscall.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("cannot create %s: directory %s: %w", path, dir, err)
	}
	return nil
}

// errOutput marks an output file trawl refuses to write.
var errOutput = errors.New("refusing to write")

// checkOutput refuses an existing output file that is a symbolic link,
// not a regular file, owned by another user than the one trawl runs as,
// or linked from elsewhere too.
func checkOutput(path string, fi os.FileInfo) error {
	switch mode := fi.Mode(); {
	case isDevNull(fi):
		// The one device written to: the usual sink of an output not
		// wanted.
		return nil
	case mode&os.ModeSymlink != 0:
		return fmt.Errorf("%w %s: it is a symbolic link", errOutput, path)
	case mode.IsDir():
		return fmt.Errorf("%w %s: it is a directory", errOutput, path)
	case !mode.IsRegular():
		return fmt.Errorf("%w %s: it is not a regular file", errOutput, path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w %s: it belongs to another user (uid %d)", errOutput, path, st.Uid)
	case st.Nlink > 1:
		// A hard link planted to a file of trawl's user, such as one
		// of root's where links to others' files are allowed.
		return fmt.Errorf("%w %s: it has %d hard links", errOutput, path, st.Nlink)
	}
	return nil
}

// isDevNull says whether fi is the null device, whatever its name.
func isDevNull(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&os.ModeCharDevice != 0 && unix.Major(st.Rdev) == 1 && unix.Minor(st.Rdev) == 3
}

// openOutput opens path for writing as checkWritable describes: it never
// follows a symbolic link (O_NOFOLLOW), never blocks on a FIFO
// (O_NONBLOCK), creates the file with mode 0600 (before the umask), and
// truncates an existing file only once it has checked that it is a
// regular file of trawl's user. /dev/null is the one other file allowed.
func openOutput(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP):
			return nil, fmt.Errorf("%w %s: it is a symbolic link", errOutput, path)
		case errors.Is(err, unix.EISDIR):
			return nil, fmt.Errorf("%w %s: it is a directory", errOutput, path)
		case errors.Is(err, unix.ENXIO):
			// A FIFO no one reads, or a device without its driver.
			return nil, fmt.Errorf("%w %s: it is not a regular file", errOutput, path)
		}
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	// Blocking again before os.NewFile sees the descriptor: a file is
	// written with plain writes, not through Go's poller.
	err = unix.SetNonblock(fd, false)
	file := os.NewFile(uintptr(fd), path)
	var fi os.FileInfo
	if err == nil {
		fi, err = file.Stat()
	}
	if err == nil {
		err = checkOutput(path, fi)
	}
	if err == nil && fi.Mode().IsRegular() {
		err = file.Truncate(0)
	}
	if err != nil {
		file.Close()
		if errors.Is(err, errOutput) {
			return nil, err
		}
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	return file, nil
}

// outputFile is the file of -o or --perfetto: its errors name it, and
// closing it syncs it first, so that every error of writing it is seen.
type outputFile struct {
	file   *os.File
	failed bool // a write failed, and said so
}

func (o *outputFile) Write(p []byte) (int, error) {
	n, err := o.file.Write(p)
	if err != nil {
		o.failed = true
		err = fmt.Errorf("writing %s: %w", o.file.Name(), unwrapPath(err))
	}
	return n, err
}

// Close syncs and closes the file (/dev/null is not synced). After a
// failed write, whose error the run already returns, its errors are not
// said again.
func (o *outputFile) Close() error {
	var err error
	if fi, serr := o.file.Stat(); serr != nil || fi.Mode().IsRegular() {
		err = o.file.Sync()
	}
	if cerr := o.file.Close(); err == nil {
		err = cerr
	}
	if err != nil && !o.failed {
		return fmt.Errorf("writing %s: %w", o.file.Name(), unwrapPath(err))
	}
	return nil
}

// unwrapPath drops the *os.PathError around err, whose message would
// repeat the file's name.
func unwrapPath(err error) error {
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Exit statuses besides 0, 1 and 2 (usage) and the traced command's own.
const (
	exitNotFound    = 127 // the command was not found
	exitNotRunnable = 126 // the command could not be run
	exitSignal      = 128 // + the signal's number: interrupted before tracing began
)

// exitError makes trawl exit with a status, printing msg if not empty.
type exitError struct {
	status int
	msg    string
}

func (e *exitError) Error() string { return e.msg }

// runTrace traces the functions patterns select, in command (if any) or
// the whole system, as the flags f say.
func runTrace(ctx context.Context, f *traceFlags, patterns, command []string, stdout, stderr io.Writer) (err error) {
	cfg := f.config(patterns)
	if err := f.validate(command); err != nil {
		return err
	}
	if err := f.checkStackValue(patterns); err != nil {
		return err
	}
	if len(f.entries) == 0 {
		// With --entry, the entry functions are selected too.
		if err := checkExclusions(patterns); err != nil {
			return err
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if f.workload {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		command = []string{exe, workloadCommand}
	}
	// --quiet drops what is said while trawl works; errors and the
	// summary stay on stderr.
	notices := stderr
	if f.quiet {
		notices = io.Discard
	}
	if f.otlp != "" {
		warnInsecure(ctx, notices, f.otlp)
	}

	var child *gatedCommand
	var ln net.Listener
	if f.listen != "" {
		if ln, err = listenMetrics(f.listen); err != nil {
			return err
		}
		defer ln.Close()
	}
	if len(command) > 0 {
		if child, err = startGated(command, f.cred, stdout, stderr); err != nil {
			return err
		}
		defer child.kill()
		cfg.PIDs = []int{child.cmd.Process.Pid}
	}
	cfg.Progress = attachProgress(notices, time.Now())
	cfg.DetachProgress = detachProgress(notices)
	cfg.Notify = func(n string) { fmt.Fprintln(notices, "trawl:", n) }
	s, err := trawl.Open(ctx, cfg)
	if err != nil {
		if oe := (*trawl.OpenError)(nil); errors.As(err, &oe) {
			summary(stderr, oe.Stats, f.debug)
		}
		return startError(ctx, err)
	}
	defer func() {
		// After a second interrupt the kernel detaches as trawl exits.
		if !hurried(ctx) {
			s.Close()
		}
	}()
	// Checked against the session's selection, not before Open, so the
	// catalogue is read once.
	if f.hist != "" {
		if err := checkHist(s.Selection(), f.hist); err != nil {
			return err
		}
	}
	// The trace is armed: outputs are created only now, so that a run
	// that never starts leaves existing files alone.
	out, closeOut, err := f.open(stdout)
	if err != nil {
		return err
	}
	defer func() {
		// An error writing the output ends the run with status 1, even
		// when the command's status would be returned.
		if cerr := closeOut(); cerr != nil {
			if ee := (*exitError)(nil); err == nil || errors.As(err, &ee) {
				err = cerr
			} else {
				err = errors.Join(err, cerr)
			}
		}
	}()
	r, err := f.renderer(ctx, out, s, notices)
	if err != nil {
		return err
	}
	keepHeapRoom()
	st, _ := s.Stats()
	fmt.Fprintf(notices, "trawl: tracing %d functions with %s", st.Attached, s.Backend)
	if len(st.Skipped) > 0 {
		fmt.Fprintf(notices, " (%d skipped, see the summary at the end)", st.Skipped.Count())
	}
	fmt.Fprintln(notices)

	stop := newStopper(ctx)
	defer stop.release()
	if ln != nil {
		// Served through Close: a scrape waits while Close reads the
		// final figures, then gets those.
		defer serveMetrics(ln, s, f, stop.fired, notices)()
	}
	if f.duration > 0 {
		stop.after(f.duration, "duration")
	}
	if child != nil {
		if err := child.release(); err != nil {
			return err
		}
		go func() {
			<-child.exited
			stop.now("command exited")
		}()
	}
	readErr := readCalls(s, r, stop)
	return finish(ctx, s, r, stop, child, readErr, stderr, f.debug)
}

// checkStackValue refuses a value of --stack given after a space, which
// makes it a pattern: --stack takes its value joined, --stack=user.
func (f *traceFlags) checkStackValue(patterns []string) error {
	if !f.set["stack"] {
		return nil
	}
	for _, p := range patterns {
		if p == stackKernel || p == stackUser || p == stackBoth {
			return fmt.Errorf("%w: --stack takes its value after an equals sign: --stack=%s", errUsage, p)
		}
	}
	return nil
}

// config describes the trace the flags ask for; the command's process
// and notices are added once they exist.
func (f *traceFlags) config(patterns []string) trawl.Config {
	cfg := trawl.Config{Patterns: patterns, Entries: f.entries, Stack: f.stack.kernel(), UserStack: f.stack.user(), Backend: trawl.Backend(f.backend), BTF: f.btf.file, BTFDir: f.btf.dir, PIDs: f.pids, Comm: string(f.comm), Cgroup: f.cgroup, MinDuration: f.minDur, Errors: f.errors, Filter: f.filter}
	cfg.Decode.Depth, cfg.Decode.MaxBytes, cfg.Decode.Full = f.depth, f.maxBytes, f.full
	cfg.Capture.BufferBytes, cfg.Capture.Buffers = f.maxBytes, f.buffers
	cfg.Capture.Depth, cfg.Capture.CallBytes = max(f.depth-1, 0), f.callBytes
	cfg.Show = f.show
	cfg.CgroupExact = f.cgroupExact
	cfg.Track, cfg.TrackTimeout, cfg.TrackObjects = f.track, f.trackFor, f.trackObjs
	if errnos, except, _ := parseErrnos(f.errnos); except {
		cfg.ExceptErrnos = errnos
	} else {
		cfg.Errnos = errnos
	}
	cfg.RingBufferSize = int(f.ringBuffer)
	cfg.NoCache = f.noCache
	cfg.Aggregate = f.aggregate()
	cfg.StackCounts = f.stackCounts
	return cfg
}

// finish ends a trace that was stopped: the program is disarmed, what is
// already in the ring buffer is shown (for at most drainTime, none after
// a second interrupt), the output flushed, the summary printed (every
// count of it with debug), then everything detached.
func finish(ctx context.Context, s *trawl.Session, r render.Renderer, stop *stopper, child *gatedCommand, readErr error, stderr io.Writer, debug bool) error {
	stopErr := s.Stop()
	if why := stop.why(); why != "" {
		fmt.Fprintf(stderr, "trawl: stopping: %s\n", why)
	}
	pipeClosed := errors.Is(readErr, syscall.EPIPE)
	start := time.Now()
	if readErr == nil && !hurried(ctx) {
		readErr = drain(s, r, time.Now().Add(drainTime), hurryChan(ctx))
	}
	if _, err := s.Discard(); err != nil && readErr == nil {
		readErr = err
	}
	slog.Debug("stop step", "step", "drain", "took", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	renderErr := r.Close()
	slog.Debug("stop step", "step", "output", "took", time.Since(start).Round(time.Millisecond))
	if renderErr != nil && readErr != nil && renderErr.Error() == readErr.Error() {
		// The output's buffer keeps its first write error: said once.
		renderErr = nil
	}
	if pipeClosed || errors.Is(renderErr, syscall.EPIPE) {
		pipeClosed, readErr, renderErr = true, nil, nil
	}
	st, statsErr := s.Stats()
	summary(stderr, st, debug)
	if o, ok := r.(*otlpOutput); ok {
		o.summary(stderr)
	}
	if pipeClosed {
		fmt.Fprintln(stderr, "trawl: the output's reader went away: stopped")
	}
	if hurried(ctx) {
		// A second interrupt: leave the detaching to the kernel as our
		// descriptors close.
		return &exitError{status: exitSignal + int(signalOf(ctx)), msg: "interrupted twice: exiting without waiting for the detach"}
	}
	markDetaching(ctx)
	if child != nil {
		child.terminate()
	}
	start = time.Now()
	closeErr := s.Close()
	slog.Debug("stop step", "step", "close", "took", time.Since(start).Round(time.Millisecond))
	if final, err := s.Stats(); err == nil {
		lateSummary(stderr, st, final)
	}
	if err := errors.Join(readErr, stopErr, statsErr, closeErr, renderErr); err != nil {
		return err
	}
	if hurried(ctx) {
		// A second interrupt came after the check above, and the detach
		// finished first (quick with few functions): still the status
		// of an interrupted run.
		return &exitError{status: exitSignal + int(signalOf(ctx)), msg: "interrupted twice: exiting; the trace had already detached"}
	}
	if child != nil {
		return child.status()
	}
	return nil
}

// drainTime bounds how long a stopped trace keeps showing the calls
// already in the ring buffer; the rest are counted as not shown.
const drainTime = 500 * time.Millisecond

// flushEvery is the longest output waits in a buffer while calls flow.
const flushEvery = 100 * time.Millisecond

// readCalls renders calls until stop fires, flushing the output at least
// every flushEvery and whenever the ring buffer runs empty.
func readCalls(s *trawl.Session, r render.Renderer, stop *stopper) error {
	var c trawl.Call
	flushed := time.Now()
	s.SetDeadline(flushed.Add(flushEvery))
	for !stop.fired() {
		err := s.Read(context.Background(), &c)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Idle (or the deadline passed as the buffer ran empty).
		case errors.Is(err, trawl.ErrClosed):
			return nil
		case err != nil:
			return err
		default:
			if err := r.Call(&c); err != nil {
				return err
			}
			if time.Since(flushed) < flushEvery {
				continue
			}
		}
		if err := r.Flush(); err != nil {
			return err
		}
		flushed = time.Now()
		s.SetDeadline(flushed.Add(flushEvery))
	}
	return nil
}

// drain renders the calls waiting in the ring buffer until it is empty,
// until the deadline, or until hurry closes.
func drain(s *trawl.Session, r render.Renderer, deadline time.Time, hurry <-chan struct{}) error {
	var c trawl.Call
	s.SetDeadline(time.Now())
	for time.Now().Before(deadline) {
		select {
		case <-hurry:
			return nil
		default:
		}
		err := s.Read(context.Background(), &c)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, trawl.ErrClosed):
			return nil
		case err != nil:
			return err
		}
		if err := r.Call(&c); err != nil {
			return err
		}
	}
	return nil
}

// startError words an error of Open for the user: an interrupt is
// "interrupted", with the status of the signal.
func startError(ctx context.Context, err error) error {
	if sig := signalOf(ctx); sig != 0 && errors.Is(err, context.Canceled) {
		return &exitError{status: exitSignal + int(sig), msg: "interrupted before tracing began"}
	}
	return err
}

// outputFormat returns the format the flags chose, --format or an alias.
func (f *traceFlags) outputFormat() string {
	switch {
	case f.json:
		return formatJSON
	case f.tree:
		return formatTree
	case f.perfetto != "":
		return formatPerfetto
	case f.stats && !f.set["format"]:
		return formatStats
	}
	return f.format
}

// aggregate says the kernel counts the calls, sending none: --stats, or
// --format stats.
func (f *traceFlags) aggregate() bool {
	return f.stats || f.outputFormat() == formatStats
}

// open creates the output file of -o or --perfetto, or returns stdout,
// with the function that closes it.
func (f *traceFlags) open(stdout io.Writer) (io.Writer, func() error, error) {
	path := cmp.Or(f.output, f.perfetto)
	if path == "" {
		return stdout, func() error { return nil }, nil
	}
	file, err := openOutput(path)
	if err != nil {
		return nil, nil, err
	}
	out := &outputFile{file: file}
	return out, out.Close, nil
}

// colorFor says whether --color asks for colours on w.
func (f *traceFlags) colorFor(w io.Writer) bool {
	switch f.color {
	case "always":
		return true
	case "never":
		return false
	}
	file, ok := w.(*os.File)
	return ok && render.IsTerminal(file.Fd()) && os.Getenv("NO_COLOR") == ""
}

// renderer picks the output format, and adds the --otlp export.
func (f *traceFlags) renderer(ctx context.Context, w io.Writer, s *trawl.Session, notices io.Writer) (render.Renderer, error) {
	opts := render.Options{Color: f.colorFor(w)}
	if off, err := render.WallOffset(); err == nil {
		opts.WallOffset = off
	}
	if f.otlp == "" {
		return f.formatRenderer(w, s, opts)
	}
	var r render.Renderer
	// With --otlp the calls are written out only when asked for.
	if f.aggregate() || f.set["format"] || f.json || f.tree || f.perfetto != "" || f.output != "" {
		var err error
		if r, err = f.formatRenderer(w, s, opts); err != nil {
			return nil, err
		}
	}
	return f.wrapOTLP(ctx, r, s, opts.WallOffset, notices)
}

// formatRenderer makes the renderer of the output format.
func (f *traceFlags) formatRenderer(w io.Writer, s *trawl.Session, opts render.Options) (render.Renderer, error) {
	switch f.outputFormat() {
	case formatJSON:
		return render.NewJSON(w, opts), nil
	case formatTree:
		if f.track != "" {
			return render.NewJourneys(w, opts, true), nil
		}
		return render.NewTree(w, opts), nil
	case formatPerfetto:
		return render.NewPerfettoProto(w, opts), nil
	case formatChromeJSON:
		return render.NewChromeJSON(w), nil
	case formatFolded:
		if f.aggregate() {
			// The kernel counts the calls by stack.
			return render.NewFoldedCounts(w, s.StackCounts), nil
		}
		return render.NewFolded(w), nil
	case formatHTML:
		return render.NewHTML(w), nil
	case formatStats:
		// The kernel counts the calls: no record per call, so no drops.
		return render.NewStats(w, render.StatsOptions{Options: opts, Interval: f.interval, SortBy: f.sortBy, Histogram: f.hist, Source: s.FunctionStats})
	}
	if f.track != "" {
		return render.NewJourneys(w, opts, false), nil
	}
	return render.NewText(w, opts), nil
}

// attachProgress reports attach progress on stderr once more than a
// second has passed since start, at most once a second.
func attachProgress(w io.Writer, start time.Time) func(attached, skipped, total int) {
	report := every(time.Second, start)
	return func(attached, skipped, total int) {
		if elapsed, ok := report(attached+skipped == total); ok {
			fmt.Fprintf(w, "trawl: attached %d of %d functions, %d skipped (%.1fs)\n", attached, total, skipped, elapsed.Seconds())
		}
	}
}

// detachProgress reports detach progress on stderr the same way, from
// the first link closed.
func detachProgress(w io.Writer) func(done, total int) {
	report := every(time.Second, time.Time{})
	return func(done, total int) {
		if elapsed, ok := report(done == total); ok {
			fmt.Fprintf(w, "trawl: detached %d of %d links (%.1fs)\n", done, total, elapsed.Seconds())
		}
	}
}

// every returns a function that says, at each step, whether to report
// and the time since start (zero: the first step): after d has passed,
// at most every d, and at the last step.
func every(d time.Duration, start time.Time) func(last bool) (time.Duration, bool) {
	prev := start
	return func(last bool) (time.Duration, bool) {
		now := time.Now()
		if start.IsZero() {
			start, prev = now, now
		}
		if now.Sub(start) < d || (now.Sub(prev) < d && !last) {
			return 0, false
		}
		prev = now
		return now.Sub(start), true
	}
}

// checkHist checks that --hist names a function the patterns select.
func checkHist(sel *trawl.Selection, name string) error {
	if !slices.ContainsFunc(sel.Selected, func(fn trawl.Function) bool { return fn.Name == name }) {
		return fmt.Errorf("%w: --hist %s: not among the selected functions", errUsage, name)
	}
	return nil
}

// parseErrnos parses --errno: error names separated by commas, all but
// them with a leading "!" (except).
func parseErrnos(s string) (errnos []syscall.Errno, except bool, err error) {
	if s == "" {
		return nil, false, nil
	}
	s, except = strings.CutPrefix(s, "!")
	for name := range strings.SplitSeq(s, ",") {
		e, err := trawl.ErrnoByName(strings.TrimSpace(name))
		if err != nil {
			return nil, false, err
		}
		errnos = append(errnos, e)
	}
	return errnos, except, nil
}

// checkExclusions refuses patterns that are all exclusions: they would
// select every traceable function but those, tens of thousands, which
// '*' must ask for.
func checkExclusions(patterns []string) error {
	if len(patterns) == 0 || slices.ContainsFunc(patterns, func(p string) bool { return !strings.HasPrefix(p, "!") }) {
		return nil
	}
	return fmt.Errorf("%w: every pattern is an exclusion, and exclusions only take away: add '*' to select every function but those: '*' '%s'", errUsage, strings.Join(patterns, "' '"))
}
