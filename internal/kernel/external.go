// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// ExternalBTF is the BTF of a kernel that has none of its own (no
// /sys/kernel/btf), read from files: BTFHub's, or one extracted from the
// kernel's image.
type ExternalBTF struct {
	// File is the BTF of vmlinux: raw BTF, or an ELF file with a .BTF
	// section (vmlinux itself).
	File string
	// Dir, if set, holds the split BTF of modules, one file per module
	// named by it, as /sys/kernel/btf does.
	Dir string
}

// ErrExternalBTF is wrapped by the refusal of what needs the kernel's own
// BTF while the process uses external BTF: the kernel finds the function
// a trampoline (fentry, fexit, fsession, tracing_multi) or a BTF-typed
// tracepoint attaches to by a BTF id of its own.
var ErrExternalBTF = errors.New("the kernel has no BTF of its own")

// external is the process's external BTF, set once by UseBTF.
var external struct {
	sync.Mutex
	btf  *ExternalBTF
	spec *btf.Spec
	root fs.FS // liveRoot with the external BTF in place of sys/kernel/btf
	// checked is the last ExternalBTF CheckBTF parsed, with its spec.
	checked     ExternalBTF
	checkedSpec *btf.Spec
}

// CheckBTF reads and parses ext, and says in one line what is wrong with
// it: a file missing, neither raw BTF nor an ELF file, an ELF file
// without a .BTF section, a Dir that is not a directory.
func CheckBTF(ext ExternalBTF) error {
	_, err := parseExternal(ext)
	return err
}

// parseExternal returns the spec of ext.File; the last one parsed is
// kept, so that checking a configuration and then using it parses once.
func parseExternal(ext ExternalBTF) (*btf.Spec, error) {
	external.Lock()
	defer external.Unlock()
	if ext == external.checked && external.checkedSpec != nil {
		return external.checkedSpec, nil
	}
	if ext.File == "" {
		return nil, errors.New("no BTF file given")
	}
	if ext.Dir != "" {
		info, err := os.Stat(ext.Dir)
		if err != nil {
			return nil, fmt.Errorf("module BTF directory: %w", err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("module BTF directory %s is not a directory", ext.Dir)
		}
	}
	data, err := os.ReadFile(ext.File)
	if err != nil {
		return nil, fmt.Errorf("read BTF: %w", err)
	}
	raw, err := rawBTF(data)
	if err != nil {
		return nil, err
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse BTF: %w", err)
	}
	external.checked, external.checkedSpec = ext, spec
	return spec, nil
}

// UseBTF makes the process read the kernel's types from ext in place of
// /sys/kernel/btf: its catalogue, its feature probes and every program
// it loads (LoadOptions). A process uses one kernel BTF: once ext is in
// use, using another fails.
func UseBTF(ext ExternalBTF) error {
	spec, err := parseExternal(ext)
	if err != nil {
		return err
	}
	external.Lock()
	defer external.Unlock()
	if external.btf != nil {
		if *external.btf != ext {
			return fmt.Errorf("the process uses the BTF of %s already: it uses one kernel BTF", external.btf.File)
		}
		return nil
	}
	external.btf, external.spec = &ext, spec
	external.root = &btfRoot{FS: liveRoot, ext: ext}
	return nil
}

// External returns the external BTF the process uses, nil when it uses
// the kernel's own.
func External() *ExternalBTF {
	external.Lock()
	defer external.Unlock()
	return external.btf
}

// BTFOrigin says where the process's kernel BTF comes from, for the user:
// the kernel (/sys/kernel/btf/vmlinux) or a file.
func BTFOrigin() string {
	ext := External()
	switch {
	case ext == nil:
		return "the kernel (/sys/kernel/btf/vmlinux)"
	case ext.Dir != "":
		return fmt.Sprintf("file %s, modules from %s", ext.File, ext.Dir)
	}
	return "file " + ext.File
}

// KernelTypes returns the kernel's types: those of the external BTF in
// use, else the kernel's own, decoded once for the process (BTFCache).
func KernelTypes() (*btf.Spec, error) {
	external.Lock()
	spec := external.spec
	external.Unlock()
	if spec != nil {
		return spec, nil
	}
	return BTFCache().Kernel()
}

// LoadOptions returns the options of every cilium/ebpf load, with maps
// as its MapReplacements: the process's BTF cache, and the external BTF's
// types as the kernel's for CO-RE relocations when one is in use.
func LoadOptions(maps map[string]*ebpf.Map) ebpf.CollectionOptions {
	opts := ebpf.CollectionOptions{MapReplacements: maps, Cache: BTFCache()}
	external.Lock()
	opts.Programs.KernelTypes = external.spec
	external.Unlock()
	return opts
}

// liveFS returns the running system's files as the live catalogue reads
// them: with the external BTF in place of sys/kernel/btf when one is in
// use.
func liveFS() fs.FS {
	external.Lock()
	defer external.Unlock()
	if external.root != nil {
		return external.root
	}
	return liveRoot
}

// btfRoot is a file system laid out like / whose sys/kernel/btf holds
// the files of an ExternalBTF: vmlinux is ext.File, a module ext.Dir's
// file of its name; everything else is FS's.
type btfRoot struct {
	fs.FS
	ext ExternalBTF
}

// WithBTF returns fsys with ext's files in place of sys/kernel/btf, for
// a catalogue read from them (Load, LoadNames).
func WithBTF(fsys fs.FS, ext ExternalBTF) fs.FS { return &btfRoot{FS: fsys, ext: ext} }

// Open opens sys/kernel/btf/NAME from the external BTF, anything else
// from the file system below.
func (r *btfRoot) Open(name string) (fs.File, error) {
	dir, module := path.Split(name)
	if path.Clean(dir) != btfDir {
		return r.FS.Open(name)
	}
	file := r.ext.File
	if module != vmlinuxModule {
		if r.ext.Dir == "" || strings.HasPrefix(module, ".") {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		file = filepath.Join(r.ext.Dir, module)
	}
	return os.Open(file)
}

// rawBTF returns the raw BTF in data: data itself, or the .BTF section of
// an ELF file.
func rawBTF(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		if len(data) < 2 || (data[0] != 0x9f || data[1] != 0xeb) && (data[0] != 0xeb || data[1] != 0x9f) {
			return nil, errors.New("neither raw BTF nor an ELF file")
		}
		return data, nil
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read ELF: %w", err)
	}
	sec := f.Section(".BTF")
	if sec == nil {
		return nil, errors.New("an ELF file without a .BTF section (a kernel built without CONFIG_DEBUG_INFO_BTF, or stripped)")
	}
	if sec.Type == elf.SHT_NOBITS {
		return nil, errors.New("an ELF file whose .BTF section is empty")
	}
	raw, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read the .BTF section: %w", err)
	}
	return raw, nil
}
