// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"os"
)

// DefaultRingBufferSize is the size in bytes of the ring buffer through
// which the capture program sends the calls, when Config.RingBufferSize
// is 0: 16 MiB.
const DefaultRingBufferSize = 16 << 20

// MaxRingBufferSize is the largest ring buffer the kernel takes: its size
// is a 32-bit number of bytes, and a power of two.
const MaxRingBufferSize = 1 << 31

// CheckRingBufferSize says why size, in bytes, cannot be the size of the
// ring buffer, or returns nil: the kernel wants a power of two number of
// pages, and at most MaxRingBufferSize bytes.
func CheckRingBufferSize(size int) error {
	page := os.Getpagesize()
	if size < page || size > MaxRingBufferSize || size&(size-1) != 0 {
		return fmt.Errorf("ring buffer size of %d bytes: the kernel wants a power of two from one page (%d bytes) to %d bytes", size, page, MaxRingBufferSize)
	}
	return nil
}
