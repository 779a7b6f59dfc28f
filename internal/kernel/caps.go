// SPDX-License-Identifier: Apache-2.0

package kernel

import "golang.org/x/sys/unix"

// EffectiveCaps returns this process's effective capabilities, bit n for
// capability n, 0 when they cannot be read.
func EffectiveCaps() uint64 {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return 0
	}
	return uint64(data[1].Effective)<<32 | uint64(data[0].Effective)
}
