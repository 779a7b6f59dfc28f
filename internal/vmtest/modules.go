// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// guestModules are the modules a guest needs: virtio PCI and serial ports
// (built in from 6.12, modules on 6.1) and the 9p filesystem over virtio.
var guestModules = []string{"virtio_pci", "virtio_console", "9pnet_virtio", "9p"}

// spareModule is the module put in the initramfs as guest.SpareModule.
const spareModule = "dummy"

// module is a kernel module file and its contents, decompressed.
type module struct {
	name string
	data []byte
}

// resolveModules returns the modules among names that are not built into
// the kernel, with their dependencies, dependencies first. Debian's
// packages ship no modules.dep (depmod runs at install), so dependencies
// come from each module's .modinfo section.
func resolveModules(ctx context.Context, u *Unpacked, names []string) ([]module, error) {
	builtin, err := builtinModules(u.Modules)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	err = filepath.WalkDir(filepath.Join(u.Modules, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name, ok := moduleName(d.Name()); ok {
			files[name] = path
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index the modules of %s: %w", u.ID, err)
	}
	var order []module
	seen := map[string]bool{}
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		name = strings.ReplaceAll(name, "-", "_")
		if seen[name] || builtin[name] {
			return nil
		}
		seen[name] = true
		path, ok := files[name]
		if !ok {
			return fmt.Errorf("kernel %s has no module %s (needed by %s)", u.ID, name, strings.Join(chain, " <- "))
		}
		data, err := readModule(ctx, path)
		if err != nil {
			return err
		}
		deps, err := moduleDepends(data)
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		for _, dep := range deps {
			if err := visit(dep, append(chain, name)); err != nil {
				return err
			}
		}
		order = append(order, module{name: name, data: data})
		return nil
	}
	for _, name := range names {
		if err := visit(name, []string{"guest"}); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleName returns a module's name from its file name.
func moduleName(file string) (string, bool) {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if name, ok := strings.CutSuffix(file, ext); ok {
			return strings.ReplaceAll(name, "-", "_"), true
		}
	}
	return "", false
}

func builtinModules(dir string) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		return nil, fmt.Errorf("read the list of built-in modules: %w", err)
	}
	defer f.Close()
	builtin := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if name, ok := moduleName(filepath.Base(s.Text())); ok {
			builtin[name] = true
		}
	}
	return builtin, s.Err()
}

// readModule returns a module file's contents, decompressed with the
// matching command: the guest kernel may lack in-kernel decompression.
func readModule(ctx context.Context, path string) ([]byte, error) {
	var tool string
	switch filepath.Ext(path) {
	case ".ko":
		return os.ReadFile(path)
	case ".xz":
		tool = "xz"
	case ".zst":
		tool = "zstd"
	case ".gz":
		tool = "gzip"
	}
	out, err := exec.CommandContext(ctx, tool, "-dc", path).Output()
	if err != nil {
		return nil, fmt.Errorf("decompress %s with %s: %w", path, tool, err)
	}
	return out, nil
}

// moduleDepends reads the "depends=" entry of a module's .modinfo section.
func moduleDepends(data []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("no .modinfo section")
	}
	info, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, entry := range bytes.Split(info, []byte{0}) {
		if deps, ok := bytes.CutPrefix(entry, []byte("depends=")); ok {
			if len(deps) == 0 {
				return nil, nil
			}
			return strings.Split(string(deps), ","), nil
		}
	}
	return nil, nil
}
