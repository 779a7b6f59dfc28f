// SPDX-License-Identifier: Apache-2.0

package kernel

import "golang.org/x/sys/unix"

// TracefsMounted reports whether tracefs is mounted at one of
// tracefsDirs, where trawl and cilium/ebpf look for it. It needs no
// permission to read tracefs.
func TracefsMounted() bool {
	for _, dir := range tracefsDirs {
		var st unix.Statfs_t
		if unix.Statfs("/"+dir, &st) == nil && st.Type == unix.TRACEFS_MAGIC {
			return true
		}
	}
	return false
}
