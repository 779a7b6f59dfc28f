// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// initialPIDNamespace is the inode number of the initial PID namespace,
// PROC_PID_INIT_INO in include/linux/proc_ns.h, the same on every kernel.
const initialPIDNamespace = 0xEFFFFFFC

// pidNamespace names trawl's PID namespace by the device and inode of
// /proc/self/ns/pid, as bpf_get_ns_current_pid_tgid takes it.
type pidNamespace struct{ dev, ino uint64 }

// ownPIDNamespace returns trawl's PID namespace, and whether it is the
// initial one, whose process ids the programs see.
func ownPIDNamespace() (ns pidNamespace, initial bool, err error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return ns, false, fmt.Errorf("find trawl's PID namespace: %w", err)
	}
	return pidNamespace{dev: st.Dev, ino: st.Ino}, st.Ino == initialPIDNamespace, nil
}

// configurePIDNamespace makes the capture program translate process ids
// through trawl's PID namespace when it is not the initial one: a record
// then carries the ids the user of trawl sees (0 for a task outside the
// namespace), and the processes of cfg.PIDs, numbered in it, are found by
// the program when they first run (nspids in taskfilter.h). It checks
// that each can be: it returns whether the namespace is another.
func configurePIDNamespace(spec *ebpf.CollectionSpec, cfg Config) (bool, error) {
	ns, initial, err := ownPIDNamespace()
	if err != nil || initial {
		return false, err
	}
	if len(cfg.PIDs) > 0 {
		if err := checkNamespacedPIDs(cfg.PIDs); err != nil {
			return false, err
		}
	}
	for name, v := range map[string]uint64{bpf.CaptureVarPidnsDev: ns.dev, bpf.CaptureVarPidnsIno: ns.ino} {
		if err := spec.Variables[name].Set(v); err != nil {
			return false, fmt.Errorf("set %s: %w", name, err)
		}
	}
	return true, nil
}

// checkNamespacedPIDs checks that the processes trawl is to trace from a
// PID namespace other than the initial one can be told apart by the
// program: /proc must be this namespace's (so that trawl reads the
// processes the user named), and each process must run in this namespace
// itself, not in one nested in it, which the kernel's helper cannot
// translate into.
func checkNamespacedPIDs(pids []int) error {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return fmt.Errorf("read /proc/self: %w", err)
	}
	if self != strconv.Itoa(os.Getpid()) {
		return fmt.Errorf("trawl runs in a PID namespace whose /proc is another namespace's (/proc/self is %s, trawl's pid %d): mount this namespace's /proc (unshare --mount-proc) to trace processes by pid", self, os.Getpid())
	}
	for _, pid := range pids {
		ids, err := nsPIDs(pid)
		if err != nil {
			return err
		}
		if len(ids) > 1 {
			return fmt.Errorf("process %d runs in a PID namespace nested in trawl's (its pids: %s): trawl can trace it by pid only from its own namespace or the initial one", pid, strings.Join(ids, " "))
		}
	}
	return nil
}

// nsPIDs returns a process's ids from the NSpid line of its status (4.1+):
// its pid in the namespace /proc belongs to, then in each one nested in it
// down to its own.
func nsPIDs(pid int) ([]string, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			return strings.Fields(rest), nil
		}
	}
	return nil, fmt.Errorf("process %d: no NSpid line in /proc/%d/status", pid, pid)
}
