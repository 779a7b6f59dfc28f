// SPDX-License-Identifier: Apache-2.0

package main

import "github.com/spf13/cobra"

// btfFlags are --btf and --btf-dir: the kernel's BTF from files, for a
// kernel without BTF of its own.
type btfFlags struct {
	file, dir string
}

// register defines the flags on cmd.
func (f *btfFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.file, "btf", "", "read the kernel's BTF from `FILE` (raw BTF, e.g. BTFHub's, or an ELF file with a .BTF section), for a kernel without /sys/kernel/btf; only kprobe backends can attach then")
	fs.StringVar(&f.dir, "btf-dir", "", "with --btf, read the modules' BTF from `DIR`, one file per module named by it, as /sys/kernel/btf is laid out")
	cmd.MarkFlagFilename("btf")
	cmd.MarkFlagDirname("btf-dir")
}
