// SPDX-License-Identifier: Apache-2.0

package kernel

import "strings"

// splitSuffix splits a symbol name into the C function name and the suffix
// the compiler appended to it, if any: "tcp_v4_rcv.isra.0" gives
// ("tcp_v4_rcv", ".isra.0"). C identifiers have no dots, so everything
// from the first dot on is a compiler suffix.
func splitSuffix(name string) (base, suffix string) {
	if i := strings.IndexByte(name, '.'); i > 0 {
		return name[:i], name[i:]
	}
	return name, ""
}

// suffixKeepsABI reports whether a symbol with this compiler suffix is the
// function its BTF prototype describes, with the same arguments.
//
// Clang's ThinLTO promotes static functions to globals and renames them to
// name.llvm.<hash>; the code and its calling convention are unchanged.
// GCC's .isra (interprocedural scalar replacement of aggregates),
// .constprop (constant propagation into a clone) and .part (partial
// inlining) clones take different arguments than the source function, and
// .cold is a split-off block, not an entry point at all. pahole leaves such
// clones out of BTF for the same reason (see dwarves' btf_encoder, which
// skips functions with "optimized-out" or inconsistent parameters).
func suffixKeepsABI(suffix string) bool {
	return strings.HasPrefix(suffix, ".llvm.") && !strings.Contains(suffix[len(".llvm."):], ".")
}

// suffixNote explains why a compiler clone has no prototype.
func suffixNote(base, suffix string) string {
	switch {
	case strings.Contains(suffix, ".cold"):
		return "cold part of " + base + " split off by the compiler, not an entry point"
	case strings.Contains(suffix, ".isra"), strings.Contains(suffix, ".constprop"), strings.Contains(suffix, ".part"):
		return "compiler clone of " + base + " (" + suffix + "): its arguments differ from the BTF prototype"
	default:
		return "compiler-renamed copy of " + base + " (" + suffix + "): BTF prototype not known to apply"
	}
}
