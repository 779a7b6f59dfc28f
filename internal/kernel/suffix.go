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

// suffixKeepsReturn reports whether a symbol with this compiler suffix
// returns what its base function returns, though its arguments may
// differ. GCC's .constprop and .part clones change the arguments only
// (a .part clone returns to the base function's callers what the base
// function would), and a .cold block ends in the base function's return;
// .llvm.<hash> renames nothing else. An .isra clone may have its return
// value removed, when no caller uses it, so any .isra part rules it out,
// as does a suffix this does not know.
func suffixKeepsReturn(suffix string) bool {
	clone := false
	for part := range strings.SplitSeq(strings.TrimPrefix(suffix, "."), ".") {
		switch {
		case part == "part", part == "constprop", part == "cold":
			clone = true
		case part == "llvm", part != "" && strings.Trim(part, "0123456789") == "":
		default:
			return false
		}
	}
	return clone
}

// suffixNote explains why a compiler clone has no prototype.
func suffixNote(base, suffix string) string {
	switch {
	case strings.Contains(suffix, ".cold"):
		return "cold part of " + base + " split off by the compiler, not an entry point"
	case strings.Contains(suffix, ".isra"):
		return "compiler clone of " + base + " (" + suffix + "): its arguments differ from the BTF prototype, and its return value may have been removed"
	case strings.Contains(suffix, ".constprop"), strings.Contains(suffix, ".part"):
		return "compiler clone of " + base + " (" + suffix + "): its arguments differ from the BTF prototype"
	default:
		return "compiler-renamed copy of " + base + " (" + suffix + "): BTF prototype not known to apply"
	}
}
