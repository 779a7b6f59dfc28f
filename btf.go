// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"fmt"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// UseBTF makes the process read the kernel's BTF from file (raw BTF, or
// an ELF file with a .BTF section) and the modules' from dir ("" for
// none, else one file per module named by it), in place of
// /sys/kernel/btf, for a kernel without BTF of its own: for its
// catalogue of functions (List, ChooseBackend, Open), its feature probes
// (ProbeFeatures) and every program it loads. Open calls it for
// Config.BTF. The trampoline backends cannot attach then, nor can
// tracepoints: the kernel finds what they attach to by its own BTF.
//
// A file that cannot be read or holds no BTF is an error matching
// ErrBadConfig. A process uses one kernel BTF: once one is in use,
// another fails.
func UseBTF(file, dir string) error {
	if err := checkBTF(file, dir); err != nil {
		return err
	}
	if file == "" {
		return nil
	}
	return kernel.UseBTF(kernel.ExternalBTF{File: file, Dir: dir})
}

// checkBTF checks Config.BTF and Config.BTFDir: the file reads and
// parses, the directory is one. Its errors match ErrBadConfig and name
// the settings as the trawl command's flags do.
func checkBTF(file, dir string) error {
	switch {
	case file == "" && dir != "":
		return &configError{errors.New("--btf-dir needs --btf: the modules' BTF extends that of vmlinux")}
	case file == "":
		return nil
	}
	if err := kernel.CheckBTF(kernel.ExternalBTF{File: file, Dir: dir}); err != nil {
		return &configError{fmt.Errorf("--btf %s: %w", file, err)}
	}
	return nil
}
