// SPDX-License-Identifier: Apache-2.0

// Package bpf holds trawl's BPF C sources and the objects bpf2go builds
// from them, for amd64 and arm64: capture.c, the program trawl runs, built
// twice (CaptureLean leaves out the features a trace does not use: see
// FEATURE in capture.c). The objects are committed, so building trawl
// needs no clang; `make bpf` rebuilds them with the pinned clang and CI
// checks they match the sources.
package bpf

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target amd64,arm64 -type record -type plan -type limit -type cap_kind -type src_flag -type err_kind -type plan_flag -type cookie_bit -type rec_flag -type ip_hash -type filter_place -type hist_layout -type func_stats -type errno_key -type stack_count_key -type stack_mark -type tracked -type counter -cflags "-O2 -g -Wall -Werror" Capture capture.c -- -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target amd64,arm64 -cflags "-O2 -g -Wall -Werror -DTRAWL_LEAN" CaptureLean capture.c -- -I/usr/include/x86_64-linux-gnu
