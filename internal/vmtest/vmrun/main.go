// SPDX-License-Identifier: Apache-2.0

// Command vmrun runs a static binary as root in a throwaway QEMU guest of
// the test bed and exits with the binary's exit status. It works as
// `go test -exec`:
//
//	go test -exec 'bin/vmrun -kernel amd64-6.12' ./internal/...
//
// Other exit statuses: 124 when the guest timed out, 125 when its kernel
// panicked, 126 when it stopped without reporting a status, 127 when it
// could not be started. The guest console is printed when a run fails.
//
// With -bpftrace it also shares Debian's bpftrace with the guest, for the
// benchmarks (cmd/trawl-bench).
//
// With -fetch it only downloads the kernels named by -kernel (a comma list,
// or "all"), and with -fetch-otelcol builds the OpenTelemetry Collector
// meanwhile; it boots nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-dev/trawl/internal/vmtest"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		os.Exit(127)
	}
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("vmrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kernel := fs.String("kernel", os.Getenv("TRAWL_KERNEL"), "test bed `kernel` to boot, e.g. amd64-6.12 (default: $TRAWL_KERNEL, else the 6.12 kernel of the binary's arch)")
	timeout := fs.Duration("timeout", 20*time.Minute, "kill the guest after this long")
	memory := fs.Int("mem", 1024, "guest memory in MiB")
	cpus := fs.Int("smp", 2, "guest CPUs")
	cache := fs.String("cache", defaultCache(), "`dir`ectory for kernels and initramfs archives")
	initDir := fs.String("init-dir", exeDir(), "`dir`ectory holding guestinit-amd64 and guestinit-arm64")
	fetch := fs.Bool("fetch", false, "only download the kernels named by -kernel (a comma list or \"all\")")
	fetchOtelcol := fs.String("fetch-otelcol", "", "with -fetch, also build the OpenTelemetry Collector for these `arch`itectures (a comma list), while the kernels download")
	verbose := fs.Bool("v", false, "always print the guest console")
	icount := fs.Bool("icount", false, "run the guest clock by emulated instructions, so that benchmarks do not drift with host load")
	bpftrace := fs.Bool("bpftrace", false, "share Debian's bpftrace for the guest's arch (fetched on first use) with the guest, read-only; $"+guest.BpftraceEnv+" names its directory there")
	coreutils := fs.Bool("coreutils", false, "share Debian's coreutils and libc for the guest's arch (fetched on first use) with the guest, read-only; $"+guest.CoreutilsEnv+" names their directory there")
	prometheus := fs.Bool("prometheus", false, "share Debian's prometheus server and promtool for the guest's arch (fetched on first use) with the guest, read-only; $"+guest.PrometheusEnv+" names their directory there")
	otelcol := fs.Bool("otelcol", false, "share an OpenTelemetry Collector (OTLP receiver, file exporter) for the guest's arch, built from the upstream modules on first use, with the guest, read-only; $"+guest.OtelcolEnv+" names the binary there")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vmrun [flags] BINARY [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	if err := vmtest.InstallTools(ctx); err != nil {
		return 0, err
	}
	if *fetch {
		// The collector's build is mostly CPU, the kernels' download
		// mostly network: side by side, the build comes for little.
		var g errgroup.Group
		g.Go(func() error { return fetchKernels(ctx, *cache, *kernel) })
		for _, arch := range strings.FieldsFunc(*fetchOtelcol, func(r rune) bool { return r == ',' }) {
			g.Go(func() error {
				_, err := vmtest.FetchOtelcol(ctx, *cache, arch)
				return err
			})
		}
		return 0, g.Wait()
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 0, fmt.Errorf("no binary to run")
	}
	binary, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return 0, err
	}
	if *kernel == "" {
		arch, err := vmtest.BinaryArch(binary)
		if err != nil {
			return 0, err
		}
		*kernel = arch + "-6.12"
	}
	k, err := vmtest.LookupKernel(*kernel)
	if err != nil {
		return 0, err
	}
	dir, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	env, readOnly := guestEnv(), []string(nil)
	// The Debian packages shared read-only with the guest, each named to
	// it by an environment variable.
	for _, pkg := range []struct {
		want  bool
		name  string
		fetch func(context.Context, string, string) (string, error)
		env   string
	}{
		{*bpftrace, "bpftrace", vmtest.FetchBpftrace, guest.BpftraceEnv},
		{*prometheus, "prometheus", vmtest.FetchPrometheus, guest.PrometheusEnv},
		{*coreutils, "coreutils", vmtest.FetchCoreutils, guest.CoreutilsEnv},
	} {
		if !pkg.want {
			continue
		}
		root, err := pkg.fetch(ctx, *cache, k.Arch)
		if err != nil {
			return 0, fmt.Errorf("fetch %s: %w", pkg.name, err)
		}
		env = append(env, pkg.env+"="+root)
		readOnly = append(readOnly, root)
	}
	if *otelcol {
		bin, err := vmtest.FetchOtelcol(ctx, *cache, k.Arch)
		if err != nil {
			return 0, err
		}
		env = append(env, guest.OtelcolEnv+"="+bin)
		readOnly = append(readOnly, filepath.Dir(bin))
	}
	return vmtest.Run(ctx, vmtest.Options{
		Cache:    *cache,
		Kernel:   k,
		Init:     filepath.Join(*initDir, "guestinit-"+k.Arch),
		Args:     append([]string{binary}, fs.Args()[1:]...),
		Env:      env,
		Dir:      dir,
		Share:    shareRoot(dir),
		ReadOnly: readOnly,
		ICount:   *icount,
		Timeout:  *timeout,
		Memory:   *memory,
		CPUs:     *cpus,
		Stdout:   stdout,
		Stderr:   stderr,
		Console:  stderr,
		Verbose:  *verbose,
	})
}

func fetchKernels(ctx context.Context, cache, list string) error {
	ks := vmtest.Kernels
	if list != "all" && list != "" {
		ks = nil
		for _, id := range strings.Split(list, ",") {
			k, err := vmtest.LookupKernel(id)
			if err != nil {
				return err
			}
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		u, err := vmtest.Fetch(ctx, cache, k)
		if err != nil {
			return err
		}
		slog.Info("kernel ready", "kernel", k.ID, "release", u.Release)
	}
	return nil
}

// guestEnv passes the variables that steer Go programs and trawl's tests.
func guestEnv() []string {
	env := []string{"HOME=/tmp", "TMPDIR=/tmp", "PATH=/run/vmtest/bin"}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "TRAWL_"), name == "GOTRACEBACK", name == "GODEBUG", name == "GOMAXPROCS", name == "NO_COLOR":
			env = append(env, kv)
		}
	}
	return env
}

// shareRoot returns the Go module root above dir, or dir itself.
func shareRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

func defaultCache() string {
	if dir := os.Getenv("TRAWL_CACHE"); dir != "" {
		return dir
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "trawl")
	}
	return filepath.Join(os.TempDir(), "trawl-cache")
}

func exeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "."
	}
	return filepath.Dir(exe)
}
