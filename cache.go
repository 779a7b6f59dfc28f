// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// DefaultCatalogueCache is the directory where the kernel's lists of
// functions are kept between traces of one boot, unless
// Config.CatalogueCache says otherwise.
//
// The kernel takes most of a trace's start to write its lists of
// functions (/proc/kallsyms and the traceable list of tracefs): the first
// trace of a boot keeps them in a file of this directory once tracing is
// set up, and later ones read them back in one pass. The file is not
// used, and is written again, when it was written in another boot, before
// a module was loaded or removed, for other BTF, or when it is damaged,
// foreign or not root's alone: the directory must be no symbolic link,
// owned by root with mode 0700, the file root's with mode 0600, and its
// version, CRC-32C checksum and key (boot ID, BTF sizes, loaded modules)
// must match. Only a process running as root uses it: others read the
// kernel's lists each time.
const DefaultCatalogueCache = "/run/trawl"

// checkCacheDir checks the cache settings of a Config or ListOptions.
func checkCacheDir(dir string, off bool) error {
	if dir == "" {
		return nil
	}
	if off {
		return errors.New("--no-cache cannot go with a catalogue cache directory")
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("catalogue cache directory %q is not an absolute path", dir)
	}
	return nil
}

// catalogueCache returns the cache to load the kernel's catalogue through,
// nil for none.
func catalogueCache(dir string, off bool) *kernel.Cache {
	if off || os.Geteuid() != 0 {
		return nil
	}
	return kernel.NewCache(cmp.Or(dir, DefaultCatalogueCache))
}

// ClearCatalogueCache removes the kernel's lists kept in dir (""
// for DefaultCatalogueCache); a missing directory is no error. It refuses
// a directory that is a symbolic link or not root's alone (mode 0700).
func ClearCatalogueCache(dir string) error {
	if err := checkCacheDir(dir, false); err != nil {
		return err
	}
	if err := kernel.NewCache(cmp.Or(dir, DefaultCatalogueCache)).Clear(); err != nil {
		return fmt.Errorf("clear the catalogue cache: %w", err)
	}
	return nil
}
