// SPDX-License-Identifier: Apache-2.0

package bpf

// CaptureObject returns the compiled capture program (the committed ELF
// object for this architecture) that LoadCapture reads. Callers must not
// modify it.
func CaptureObject() []byte {
	return _CaptureBytes
}
