// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"sync"

	"github.com/cilium/ebpf"
)

// CaptureObject returns the compiled capture program (the committed ELF
// object for this architecture) that LoadCapture reads. Callers must not
// modify it.
func CaptureObject() []byte {
	return _CaptureBytes
}

// CaptureSpec returns a copy of the capture program's spec (LoadCapture),
// parsed once per process: parsing its ELF object and BTF took 0.15 s of
// each session's start under emulation (15 ms on a host), and copying it
// a fifteenth of that.
func CaptureSpec() (*ebpf.CollectionSpec, error) { return copySpec(captureSpec()) }

// CaptureLeanSpec returns a copy of the lean capture program's spec
// (LoadCaptureLean), parsed once per process as in CaptureSpec.
func CaptureLeanSpec() (*ebpf.CollectionSpec, error) { return copySpec(captureLeanSpec()) }

var (
	captureSpec     = sync.OnceValues(LoadCapture)
	captureLeanSpec = sync.OnceValues(LoadCaptureLean)
)

func copySpec(spec *ebpf.CollectionSpec, err error) (*ebpf.CollectionSpec, error) {
	if err != nil {
		return nil, err
	}
	return spec.Copy(), nil
}
