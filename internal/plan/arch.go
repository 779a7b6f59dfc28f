// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Arch is a CPU architecture with its own calling convention.
type Arch uint8

// Architectures trawl plans for.
const (
	AMD64 Arch = iota // x86-64, System V psABI
	ARM64             // AArch64, AAPCS64
	numArch
)

func (a Arch) String() string {
	switch a {
	case AMD64:
		return "amd64"
	case ARM64:
		return "arm64"
	}
	return fmt.Sprintf("Arch(%d)", uint8(a))
}

// ArgRegs returns how many registers pass arguments: rdi, rsi, rdx, rcx,
// r8, r9 on x86-64; x0-x7 on arm64.
func (a Arch) ArgRegs() int {
	if a == AMD64 {
		return amd64ArgRegs
	}
	return arm64ArgRegs
}

// ParseArch parses a GOARCH name ("amd64", "arm64").
func ParseArch(name string) (Arch, error) {
	switch name {
	case "amd64", "x86_64":
		return AMD64, nil
	case "arm64", "aarch64":
		return ARM64, nil
	}
	return 0, fmt.Errorf("unsupported architecture %q (trawl knows amd64 and arm64)", name)
}

// HostArch returns the architecture trawl runs on.
func HostArch() (Arch, error) { return ParseArch(runtime.GOARCH) }

// LocKind says whether an argument is in registers or on the stack.
type LocKind uint8

// Kinds of locations.
const (
	InReg   LocKind = iota // in argument register Reg (and Reg+1 for two slots)
	OnStack                // at Offset bytes from the stack pointer at entry
)

// Loc is where a kprobe finds an argument at function entry. Every plan
// holds one per argument and architecture, so its fields are as small as
// their values: 8 bytes, not 32.
type Loc struct {
	Kind LocKind
	// Reg indexes the architecture's argument registers: rdi, rsi, rdx,
	// rcx, r8, r9 on x86-64; x0-x7 on arm64. A value of two slots takes
	// Reg and Reg+1.
	Reg int8
	// Indirect means the location holds the address of the value rather
	// than the value: arm64 passes structs over 16 bytes that way.
	Indirect bool
	// Offset is the byte offset from the stack pointer at function entry
	// when Kind is OnStack. On x86-64 the first stack argument is at 8
	// (the return address is at 0); on arm64 at 0.
	Offset int32
}

func (l Loc) String() string {
	ind := ""
	if l.Indirect {
		ind = "*"
	}
	if l.Kind == OnStack {
		return fmt.Sprintf("%s[sp+%d]", ind, l.Offset)
	}
	return fmt.Sprintf("%sreg%d", ind, l.Reg)
}

// alignUp rounds n up to a multiple of a.
func alignUp(n, a int) int { return (n + a - 1) / a * a }

// HostKernel reads the running kernel's major and minor version.
func HostKernel() (KernelVersion, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return KernelVersion{}, err
	}
	release := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return KernelVersion{}, fmt.Errorf("cannot parse kernel release %q", release)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return KernelVersion{}, fmt.Errorf("cannot parse kernel release %q", release)
	}
	return KernelVersion{Major: major, Minor: minor}, nil
}
