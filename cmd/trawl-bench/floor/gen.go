// SPDX-License-Identifier: Apache-2.0

// Package floor holds floor.c, the least a tracer must do to report or to
// count a call, and the objects bpf2go builds from it, for amd64 and
// arm64. Only trawl-bench loads them, to set trawl's per-call cost beside
// this floor's. floor.c reads the kernel as trawl's capture program does,
// through internal/bpf's kernel.h. The objects are committed, so building
// the bench needs no clang; `make bpf` rebuilds them with the pinned clang
// and CI checks they match the source.
package floor

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target amd64,arm64 -cflags "-O2 -g -Wall -Werror -I../../../internal/bpf" Floor floor.c -- -I/usr/include/x86_64-linux-gnu
