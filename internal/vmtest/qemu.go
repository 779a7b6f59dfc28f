// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// Exit statuses of a run that are not the binary's own.
const (
	// ExitTimeout: the guest ran out of time and was killed.
	ExitTimeout = 124
	// ExitPanic: the guest kernel panicked.
	ExitPanic = 125
	// ExitNoStatus: the guest stopped without reporting a status.
	ExitNoStatus = 126
)

// Options describe one guest run.
type Options struct {
	// Cache is where kernels and initramfs archives are kept.
	Cache string
	// Kernel is the kernel to boot.
	Kernel Kernel
	// Init is the guest init binary for the kernel's architecture.
	Init string
	// Args is the binary to run (a static executable on the host) and its
	// arguments.
	Args []string
	// Env is the binary's environment.
	Env []string
	// Dir is the working directory; Share, the host directory mounted at
	// the same path in the guest, must contain it.
	Dir, Share string
	// ReadOnly are further host directories the guest mounts read-only at
	// the same paths.
	ReadOnly []string
	// ICount runs the guest's clock by emulated instructions (QEMU's
	// -icount shift=0: one ns per instruction), so that times measured in
	// the guest count instructions and do not drift with host load. For
	// benchmarks; it needs single-threaded TCG.
	ICount bool
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Memory in MiB and the number of CPUs of the guest.
	Memory, CPUs int
	// Stdout and Stderr receive the binary's output as it runs.
	Stdout, Stderr io.Writer
	// Console receives the guest's console log when the run fails, or
	// always when Verbose is set.
	Console io.Writer
	Verbose bool
}

// Run boots a guest, runs the binary in it and returns its exit status,
// or ExitTimeout, ExitPanic or ExitNoStatus. An error means the guest could
// not be started.
func Run(ctx context.Context, o Options) (int, error) {
	if err := checkArch(o.Args[0], o.Kernel.Arch); err != nil {
		return 0, err
	}
	u, err := Fetch(ctx, o.Cache, o.Kernel)
	if err != nil {
		return 0, err
	}
	base, err := baseArchive(ctx, o.Cache, u, o.Init)
	if err != nil {
		return 0, err
	}
	binary, err := os.ReadFile(o.Args[0])
	if err != nil {
		return 0, err
	}
	spec := guest.Spec{
		Args:     append([]string{"/run/vmtest/bin/" + filepath.Base(o.Args[0])}, o.Args[1:]...),
		Env:      append(o.Env, guest.KernelEnv+"="+o.Kernel.ID),
		Dir:      o.Dir,
		Share:    o.Share,
		ReadOnly: o.ReadOnly,
		Hung:     hungAt(time.Now(), o.Timeout),
	}
	perRun, err := runArchive(spec, binary)
	if err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp("", "trawl-vm-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	initrd := filepath.Join(tmp, "initrd")
	if err := concat(initrd, perRun, base); err != nil {
		return 0, fmt.Errorf("write initramfs: %w", err)
	}

	for attempt := 1; ; attempt++ {
		code, booted, err := boot(ctx, o, u.Image, initrd, tmp)
		if err != nil || code != ExitPanic || booted || attempt == bootAttempts {
			return code, err
		}
		fmt.Fprintf(o.Console, "vmrun: the %s kernel panicked while booting, before the init ran; booting again (%d of %d)\n", o.Kernel.ID, attempt+1, bootAttempts)
	}
}

// hungAt returns when a guest started at start and given timeout to run
// prints the stacks of its blocked tasks (guest.Spec.Hung): a minute
// before the runner kills it, time for a slow serial console to take
// them.
func hungAt(start time.Time, timeout time.Duration) time.Time {
	if timeout < 3*time.Minute {
		return time.Time{}
	}
	return start.Add(timeout - time.Minute)
}

// bootAttempts bounds how often a guest whose kernel panics while booting
// is booted again: stock kernels under TCG now and then crash in early
// boot, which says nothing about the binary under test.
const bootAttempts = 3

// boot runs the guest once. booted reports whether the init started.
func boot(ctx context.Context, o Options, image, initrd, tmp string) (code int, booted bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	console, status := filepath.Join(tmp, "console.log"), filepath.Join(tmp, "status")
	os.Remove(status)
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, false, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return 0, false, err
	}
	cmd := exec.CommandContext(ctx, qemuBinary(o.Kernel.Arch), qemuArgs(o, image, initrd, console, status)...)
	cmd.ExtraFiles = []*os.File{outW, errW} // fd 3 and 4
	cmd.Stderr = o.Console
	var g errgroup.Group
	g.Go(func() error { _, err := io.Copy(o.Stdout, outR); return err })
	g.Go(func() error { _, err := io.Copy(o.Stderr, errR); return err })
	runErr := cmd.Start()
	outW.Close()
	errW.Close()
	if runErr == nil {
		runErr = cmd.Wait()
	}
	g.Wait()
	outR.Close()
	errR.Close()

	code = exitStatus(ctx, console, status)
	log, _ := os.ReadFile(console)
	booted = bytes.Contains(log, []byte(guest.StartMarker))
	if code != 0 || o.Verbose {
		showConsole(o.Console, o.Kernel.ID, code, log)
	}
	if runErr != nil && ctx.Err() == nil && code == ExitNoStatus {
		var exit *exec.ExitError
		if !errors.As(runErr, &exit) {
			return 0, false, fmt.Errorf("start qemu: %w", runErr)
		}
	}
	return code, booted, nil
}

// exitStatus works out how the run ended.
func exitStatus(ctx context.Context, console, status string) int {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ExitTimeout
	}
	log, _ := os.ReadFile(console)
	st, _ := os.ReadFile(status)
	for _, text := range [][]byte{st, log} {
		if code, ok := findMarker(text); ok {
			return code
		}
	}
	if bytes.Contains(log, []byte("Kernel panic")) {
		return ExitPanic
	}
	return ExitNoStatus
}

func findMarker(text []byte) (int, bool) {
	s := bufio.NewScanner(bytes.NewReader(text))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if i := strings.Index(line, guest.ExitMarker); i >= 0 {
			if code, err := strconv.Atoi(line[i+len(guest.ExitMarker):]); err == nil {
				return code, true
			}
		}
	}
	return 0, false
}

func showConsole(w io.Writer, id string, code int, log []byte) {
	why := map[int]string{ExitTimeout: "timed out", ExitPanic: "kernel panic", ExitNoStatus: "no exit status"}[code]
	if why == "" {
		why = "exit status " + strconv.Itoa(code)
	}
	fmt.Fprintf(w, "--- guest console (%s, %s) ---\n%s--- end of guest console ---\n", id, why, log)
}

func qemuBinary(arch string) string {
	if arch == "arm64" {
		return "qemu-system-aarch64"
	}
	return "qemu-system-x86_64"
}

func qemuArgs(o Options, image, initrd, console, status string) []string {
	var args []string
	cmdline := "quiet panic=-1 "
	switch o.Kernel.Arch {
	case "arm64":
		// pauth=off: emulating pointer authentication makes TCG 3x slower.
		args = []string{"-M", "virt", "-cpu", "max,pauth=off", "-accel", "tcg,thread=multi"}
		cmdline += "console=ttyAMA0"
	default:
		// One host thread for all vCPUs: with multi-threaded TCG, x86
		// kernels that patch code through int3 (text_poke_bp, as every
		// attach does) now and then die of "Oops: int3" on a vCPU still
		// running the patched-away breakpoint.
		args = []string{"-M", "pc", "-cpu", "max", "-accel", "tcg,thread=single"}
		cmdline += "console=ttyS0"
	}
	cpus := o.CPUs
	if o.ICount {
		args[len(args)-1] = "tcg,thread=single"
		args = append(args, "-icount", "shift=0")
		if o.Kernel.ID == "amd64-6.1" {
			// Under -icount, this host's QEMU (7.2) lets each vCPU's
			// turn run until the next timer is due: a vCPU that spins
			// without pause or hlt uses it all, and the next vCPU's
			// turn is empty (later QEMU splits it between the vCPUs).
			// 6.1's x86 CPU bring-up spins so (do_boot_cpu calls
			// schedule() until the second CPU checks in), the second
			// CPU never runs, and the kernel hangs before its console
			// is up. With one vCPU there is nothing to bring up.
			cpus = 1
		}
	}
	args = append(args,
		"-m", strconv.Itoa(o.Memory), "-smp", strconv.Itoa(cpus),
		"-nodefaults", "-display", "none", "-no-reboot",
		"-kernel", image, "-initrd", initrd, "-append", cmdline,
		"-chardev", "file,id=console,path="+console, "-serial", "chardev:console",
		"-device", "virtio-serial-pci,id=vs",
		"-chardev", "file,id=out,path=/dev/fd/3",
		"-device", "virtserialport,bus=vs.0,chardev=out,name="+guest.PortStdout,
		"-chardev", "file,id=err,path=/dev/fd/4",
		"-device", "virtserialport,bus=vs.0,chardev=err,name="+guest.PortStderr,
		"-chardev", "file,id=status,path="+status,
		"-device", "virtserialport,bus=vs.0,chardev=status,name="+guest.PortStatus,
	)
	if o.Share != "" {
		args = append(args,
			"-fsdev", "local,id=share,path="+o.Share+",security_model=none",
			"-device", "virtio-9p-pci,fsdev=share,mount_tag=host0")
	}
	for i, dir := range o.ReadOnly {
		args = append(args,
			"-fsdev", fmt.Sprintf("local,id=ro%d,path=%s,security_model=none,readonly=on", i, dir),
			"-device", fmt.Sprintf("virtio-9p-pci,fsdev=ro%d,mount_tag=ro%d", i, i))
	}
	return args
}

// BinaryArch returns the GOARCH an ELF binary is built for.
func BinaryArch(binary string) (string, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return "", fmt.Errorf("%s: %w", binary, err)
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("%s is built for %v, which the test bed cannot run", binary, f.Machine)
}

// checkArch makes sure the binary is a static executable for arch.
func checkArch(binary, arch string) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("%s: %w", binary, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		return fmt.Errorf("%s is built for %v, but the guest is %s: build it with GOARCH=%s", binary, f.Machine, arch, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the guest has no libc: build it with CGO_ENABLED=0", binary)
		}
	}
	return nil
}
