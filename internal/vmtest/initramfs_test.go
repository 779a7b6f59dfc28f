// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPruneBases(t *testing.T) {
	dir := t.TempDir()
	age := map[string]time.Duration{
		"base-old.cpio":    48 * time.Hour, // unused for two days: removed
		"base-recent.cpio": time.Hour,
		"base-new.cpio":    72 * time.Hour, // the one just made: kept whatever its time
		"kernel.json":      72 * time.Hour, // not a base archive
	}
	for name, a := range age {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-a)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	pruneBases(dir, filepath.Join(dir, "base-new.cpio"))
	for name := range age {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone := os.IsNotExist(err); gone != (name == "base-old.cpio") {
			t.Errorf("%s: removed %v", name, gone)
		}
	}
}
