// SPDX-License-Identifier: Apache-2.0

package rawbpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// progLoadAttr is the BPF_PROG_LOAD member of union bpf_attr up to
// fd_array, with the offsets of Linux 7.3 (checked against its BTF).
type progLoadAttr struct {
	progType           uint32         // 0
	insnCnt            uint32         // 4
	insns              unsafe.Pointer // 8
	license            unsafe.Pointer // 16
	logLevel           uint32         // 24
	logSize            uint32         // 28
	logBuf             unsafe.Pointer // 32
	kernVersion        uint32         // 40
	progFlags          uint32         // 44
	progName           [16]byte       // 48
	progIfindex        uint32         // 64
	expectedAttachType uint32         // 68
	progBTFFD          uint32         // 72
	funcInfoRecSize    uint32         // 76
	funcInfo           unsafe.Pointer // 80
	funcInfoCnt        uint32         // 88
	lineInfoRecSize    uint32         // 92
	lineInfo           unsafe.Pointer // 96
	lineInfoCnt        uint32         // 104
	attachBTFID        uint32         // 108
	attachBTFObjFD     uint32         // 112
	coreReloCnt        uint32         // 116
	fdArray            unsafe.Pointer // 120
}

// progTypeTracing is BPF_PROG_TYPE_TRACING.
const progTypeTracing = 26

// logSize is the size of the verifier log buffer for a rejected program.
const logSize = 4 << 20

// TracingSpec describes a tracing program of an attach type that
// cilium/ebpf cannot load.
type TracingSpec struct {
	// Name is the program's name, cut to 15 bytes.
	Name string
	// AttachType is one of this package's attach types.
	AttachType AttachType
	// AttachBTFID is the vmlinux BTF id of the function an
	// AttachTraceFSession program is loaded against. It must be zero for
	// the multi attach types: the kernel loads those against MultiFunc
	// itself and refuses (EINVAL) any id, even MultiFunc's.
	AttachBTFID btf.TypeID
	// AttachBTF is the module BTF object AttachBTFID belongs to, or
	// which the ids of a multi program's link belong to; nil for vmlinux.
	AttachBTF *btf.Handle
	// Instructions is the program. Calls of kfuncs carry the kfunc's
	// vmlinux BTF id in Constant and asm.PseudoKfuncCall in Src.
	Instructions asm.Instructions
	// License is the program's license; tracing needs a GPL-compatible one.
	License string
}

// LoadTracing loads spec as a BPF_PROG_TYPE_TRACING program.
//
// It needs Linux 7.0 for AttachTraceFSession and Linux 7.2 on x86-64 for
// the multi attach types; on older kernels the error wraps
// ebpf.ErrNotSupported. A verifier rejection wraps ErrVerifier and ends
// with the verifier log.
func LoadTracing(spec *TracingSpec) (*ebpf.Program, error) {
	if spec.AttachType.Multi() != (spec.AttachBTFID == 0) {
		return nil, fmt.Errorf("load %s program %q: BTF id %d: multi programs take none, others need one",
			spec.AttachType, spec.Name, spec.AttachBTFID)
	}
	if len(spec.Instructions) == 0 {
		return nil, fmt.Errorf("load program %q: no instructions", spec.Name)
	}
	if err := kernelKnows(spec.AttachType); err != nil {
		return nil, fmt.Errorf("load %s program %q: %w", spec.AttachType, spec.Name, err)
	}
	var insns bytes.Buffer
	// trawl runs on amd64 and arm64, both little-endian.
	if err := spec.Instructions.Marshal(&insns, binary.LittleEndian); err != nil {
		return nil, fmt.Errorf("encode program %q: %w", spec.Name, err)
	}
	code := insns.Bytes()
	license := append([]byte(spec.License), 0)
	attr := progLoadAttr{
		progType:           progTypeTracing,
		insnCnt:            uint32(len(code) / asm.InstructionSize),
		insns:              unsafe.Pointer(&code[0]),
		license:            unsafe.Pointer(&license[0]),
		expectedAttachType: uint32(spec.AttachType),
		attachBTFID:        uint32(spec.AttachBTFID),
	}
	if spec.AttachBTF != nil {
		attr.attachBTFObjFD = uint32(spec.AttachBTF.FD())
	}
	copy(attr.progName[:len(attr.progName)-1], spec.Name)

	fd, err := progLoad(&attr)
	if err != nil {
		// Load again with a log to say why.
		buf := make([]byte, logSize)
		attr.logLevel, attr.logSize, attr.logBuf = 1, logSize, unsafe.Pointer(&buf[0])
		fd, err = progLoad(&attr)
		if err != nil {
			return nil, loadError(spec, err, buf)
		}
	}
	prog, err := ebpf.NewProgramFromFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("wrap program %q: %w", spec.Name, err)
	}
	return prog, nil
}

// progLoad loads a program, again each time a signal interrupts the
// verifier (EAGAIN, as cilium/ebpf does): a CPU profile's SIGPROF alone
// made a load of the capture program fail.
func progLoad(attr *progLoadAttr) (int, error) {
	for {
		fd, err := bpf(cmdProgLoad, attr)
		if !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
}

// loadError words a failed load: unsupported, rejected by the verifier
// (with its log), or another errno.
func loadError(spec *TracingSpec, err error, logBuf []byte) error {
	if end := bytes.IndexByte(logBuf, 0); end >= 0 {
		logBuf = logBuf[:end]
	}
	log := string(bytes.TrimRight(logBuf, "\n"))
	prefix := fmt.Sprintf("load %s program %q", spec.AttachType, spec.Name)
	switch {
	case errors.Is(err, errENOTSUPP), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%s: %w (%w)\n%s", prefix, ebpf.ErrNotSupported, err, log)
	case log != "":
		return fmt.Errorf("%s: %w (%w):\n%s", prefix, ErrVerifier, err, log)
	default:
		return fmt.Errorf("%s: %w", prefix, err)
	}
}

// kernelFuncID returns the vmlinux BTF id of the function name.
func kernelFuncID(name string) (btf.TypeID, error) {
	spec, err := kernel.KernelTypes()
	if err != nil {
		return 0, fmt.Errorf("read kernel BTF: %w", err)
	}
	var fn *btf.Func
	if err := spec.TypeByName(name, &fn); errors.Is(err, btf.ErrNotFound) {
		return 0, fmt.Errorf("kernel BTF has no function %s: %w", name, ebpf.ErrNotSupported)
	} else if err != nil {
		return 0, fmt.Errorf("find %s in kernel BTF: %w", name, err)
	}
	return spec.TypeID(fn)
}
