// SPDX-License-Identifier: Apache-2.0

// Package trawl attaches one generic BPF tracing program to many kernel
// functions at once, captures each call's arguments and return value in an
// architecture-neutral way, decodes them with the kernel's BTF and streams
// or aggregates the events.
//
// The pipeline lives in internal packages: kernel (BTF, traceable functions,
// kallsyms, feature probes), selector (the pattern language), plan (capture
// plans and per-arch ABI models), bpf (the BPF C sources and their compiled
// objects), backend (attach mechanisms), event (ring buffer, pairing),
// decode and render (output). vmtest is the QEMU test bed.
package trawl
