// SPDX-License-Identifier: Apache-2.0

// Command guestinit is PID 1 of a test bed guest. It mounts the usual
// filesystems, loads the kernel modules shipped in the initramfs, brings lo
// up, mounts the host's shared work tree (and any read-only shares), runs one command as described by
// the run specification, reports its exit status to the host and powers
// off. It must be built with CGO_ENABLED=0: the initramfs has no libc.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

func main() {
	// An init failure reports no status: the runner says so and shows the
	// console, where this message is.
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "guestinit: %v\n", err)
	}
	powerOff()
	// powerOff only returns when the kernel refused; PID 1 must not exit.
	select {}
}

func run() error {
	if err := mountAll(); err != nil {
		return err
	}
	if err := openConsole(); err != nil {
		return err
	}
	fmt.Println(guest.StartMarker)
	if err := loadModules(); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	data, err := os.ReadFile(guest.SpecPath)
	if err != nil {
		return fmt.Errorf("read run spec: %w", err)
	}
	var spec guest.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("parse run spec: %w", err)
	}
	if spec.Share != "" {
		if err := os.MkdirAll(spec.Share, 0o755); err != nil {
			return err
		}
		// msize: larger messages make reading test data and binaries faster.
		if err := unix.Mount("host0", spec.Share, "9p", 0, "trans=virtio,version=9p2000.L,msize=512000,cache=loose"); err != nil {
			return fmt.Errorf("mount the shared work tree at %s: %w", spec.Share, err)
		}
	}
	for i, dir := range spec.ReadOnly {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(fmt.Sprintf("ro%d", i), dir, "9p", unix.MS_RDONLY, "trans=virtio,version=9p2000.L,msize=512000,cache=loose"); err != nil {
			return fmt.Errorf("mount the shared directory %s: %w", dir, err)
		}
	}
	if !spec.Hung.IsZero() {
		time.AfterFunc(time.Until(spec.Hung), showHung)
	}
	ports := virtioPorts()
	stdout := openPort(ports, guest.PortStdout, os.Stdout)
	stderr := openPort(ports, guest.PortStderr, os.Stderr)
	code := runCommand(spec, stdout, stderr)
	stdout.Sync()
	stderr.Sync()
	report(ports, code)
	return nil
}

type mountPoint struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

var mounts = []mountPoint{
	{"proc", "/proc", "proc", 0, ""},
	{"sysfs", "/sys", "sysfs", 0, ""},
	{"devtmpfs", "/dev", "devtmpfs", 0, ""},
	{"tmpfs", "/tmp", "tmpfs", 0, "mode=1777"},
	{"tracefs", "/sys/kernel/tracing", "tracefs", 0, ""},
	{"debugfs", "/sys/kernel/debug", "debugfs", 0, ""},
	{"bpffs", "/sys/fs/bpf", "bpf", 0, "mode=0700"},
	{"cgroup2", "/sys/fs/cgroup", "cgroup2", 0, ""},
}

func mountAll() error {
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// openConsole makes /dev/console the init's stdin, stdout and stderr. The
// initramfs has no /dev/console node (the cpio writer cannot make device
// nodes), so the kernel starts the init without one.
func openConsole() error {
	cons, err := unix.Open("/dev/console", unix.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open the console: %w", err)
	}
	for fd := 0; fd < 3; fd++ {
		if fd == cons {
			continue
		}
		if err := unix.Dup3(cons, fd, 0); err != nil {
			return fmt.Errorf("use the console as fd %d: %w", fd, err)
		}
	}
	if cons > 2 {
		return unix.Close(cons)
	}
	return nil
}

// loadModules loads the modules listed in guest.ModulesList, in order.
// A module the kernel already has (EEXIST) is fine.
func loadModules() error {
	data, err := os.ReadFile(guest.ModulesList)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, path := range strings.Fields(string(data)) {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
		}
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// virtioPorts maps virtio-serial port names to their device files.
func virtioPorts() map[string]string {
	ports := map[string]string{}
	dirs, _ := filepath.Glob("/sys/class/virtio-ports/*")
	for _, dir := range dirs {
		name, err := os.ReadFile(filepath.Join(dir, "name"))
		if err != nil {
			continue
		}
		ports[strings.TrimSpace(string(name))] = "/dev/" + filepath.Base(dir)
	}
	return ports
}

func openPort(ports map[string]string, name string, fallback *os.File) *os.File {
	if dev, ok := ports[name]; ok {
		if f, err := os.OpenFile(dev, os.O_WRONLY, 0); err == nil {
			return f
		}
	}
	fmt.Fprintf(os.Stderr, "guestinit: no virtio port %s, using the console\n", name)
	return fallback
}

func runCommand(spec guest.Spec, stdout, stderr *os.File) int {
	if len(spec.Args) == 0 {
		fmt.Fprintln(stderr, "guestinit: the run spec has no command")
		return 126
	}
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "guestinit: %v\n", err)
		return 126
	}
}

// report writes the exit status to the status port and, as a fallback, a
// marker line to the console.
func report(ports map[string]string, code int) {
	line := fmt.Sprintf("%s%d\n", guest.ExitMarker, code)
	if dev, ok := ports[guest.PortStatus]; ok {
		if f, err := os.OpenFile(dev, os.O_WRONLY, 0); err == nil {
			f.WriteString(line)
			f.Sync()
			f.Close()
		}
	}
	os.Stdout.WriteString(line)
}

func powerOff() {
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Fprintf(os.Stderr, "guestinit: power off: %v\n", err)
	}
}

// showHung prints to the console, through the kernel's magic SysRq keys,
// the stacks of the tasks in uninterruptible sleep (w) and of the tasks
// running on each CPU (l), then sends SIGQUIT to every other process, so
// that Go programs print their goroutines: what a guest still running at
// its time limit waits for.
func showHung() {
	fmt.Fprintln(os.Stderr, "guestinit: the run is about to time out; the kernel's blocked tasks and CPUs follow")
	for _, key := range []string{"w", "l"} {
		if err := os.WriteFile("/proc/sysrq-trigger", []byte(key), 0); err != nil {
			fmt.Fprintf(os.Stderr, "guestinit: sysrq %s: %v\n", key, err)
		}
	}
	// As PID 1, kill(-1) reaches every process but the init itself.
	if err := syscall.Kill(-1, syscall.SIGQUIT); err != nil {
		fmt.Fprintf(os.Stderr, "guestinit: SIGQUIT: %v\n", err)
	}
}
