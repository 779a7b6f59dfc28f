// SPDX-License-Identifier: Apache-2.0

package kernel

import "github.com/cilium/ebpf/btf"

// btfCache holds the kernel's BTF as cilium/ebpf decodes it for loading
// programs: a load or probe without a cache of its own decodes vmlinux's
// BTF again (about 40 ms natively, a second under emulation), and trawl
// starts with several (feature probes, the capture collection, each
// fentry function's programs).
var btfCache = btf.NewCache()

// BTFCache returns the process's cache of kernel BTF, for every
// cilium/ebpf load (ebpf.CollectionOptions.Cache). It is safe for
// concurrent use.
func BTFCache() *btf.Cache { return btfCache }
