// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

const testModules = "virtio_pci 28672 0 - Live 0xffffffffc0200000\n"

// cacheFixture is the amd64 fixture with the files a cache key reads.
func cacheFixture(t *testing.T) fstest.MapFS {
	fsys := fixture(t, nil)
	fsys[bootIDPath] = &fstest.MapFile{Data: []byte("3f1c7a52-0b5e-4c1d-9a7e-6c2d8e1f4b90\n")}
	fsys[modulesPath] = &fstest.MapFile{Data: []byte(testModules)}
	fsys[btfDir+"/virtio_pci"] = &fstest.MapFile{Data: []byte("btf")}
	return fsys
}

// withoutLists returns fsys with kallsyms and the traceable lists made
// unreadable as such: a catalogue loaded from it came from a cache.
func withoutLists(fsys fstest.MapFS) fstest.MapFS {
	out := fstest.MapFS{}
	for name, f := range fsys {
		out[name] = f
	}
	for _, name := range []string{kallsymsPath, "sys/kernel/tracing/" + filterAddrs, "sys/kernel/tracing/" + filterNames} {
		out[name] = &fstest.MapFile{Data: []byte("not a kernel list\n")}
	}
	return out
}

// newTestCache returns a cache in a new directory, and its file's path.
func newTestCache(t *testing.T) (*Cache, string) {
	dir := filepath.Join(t.TempDir(), "cache")
	return NewCache(dir), filepath.Join(dir, cacheFile)
}

// loadWritten loads through c, which must miss, and writes the cache.
func loadWritten(t *testing.T, c *Cache, fsys fstest.MapFS) *Catalogue {
	t.Helper()
	cat, err := c.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if cat.keep == nil {
		t.Fatal("cache hit, want a miss")
	}
	cat.WriteCache()
	cat.waitCache()
	return cat
}

// summary lists a catalogue's functions, one a line, with what the
// kernel's lists tell of them.
func summary(c *Catalogue) string {
	var b strings.Builder
	for _, f := range c.Functions() {
		fmt.Fprintf(&b, "%s:%s %x %d %v %q %q %d\n", f.Module, f.Name, f.Addrs, f.Copies, f.Traceable, f.Reason, f.AddrNote, f.BTFID)
	}
	return b.String()
}

func TestCacheRoundTrip(t *testing.T) {
	fsys := cacheFixture(t)
	c, file := newTestCache(t)
	want := summary(loadWritten(t, c, fsys))
	for path, mode := range map[string]os.FileMode{filepath.Dir(file): os.ModeDir | 0o700, file: 0o600} {
		if st, err := os.Lstat(path); err != nil || st.Mode() != mode {
			t.Fatalf("%s: %v, mode %v, want %v", path, err, st.Mode(), mode)
		}
	}

	cached := withoutLists(fsys)
	got, err := c.Load(cached)
	if err != nil {
		t.Fatalf("load from the cache: %v", err)
	}
	if got.keep != nil {
		t.Error("cache miss on the second load")
	}
	if s := summary(got); s != want {
		t.Errorf("catalogue from the cache differs:\n%s\nwant\n%s", s, want)
	}
	if got.Source() != FromFilterAddrs || len(got.Traceable()) == 0 {
		t.Errorf("source %v, %d traceable", got.Source(), len(got.Traceable()))
	}

	names := []string{"vfs_read", "tcp_sendmsg"}
	part, err := c.LoadNames(cached, names)
	if err != nil {
		t.Fatalf("load names from the cache: %v", err)
	}
	direct, err := LoadNames(fsys, names)
	if err != nil {
		t.Fatal(err)
	}
	if s, w := summary(part), summary(direct); s != w || s == "" {
		t.Errorf("names from the cache:\n%s\nwant\n%s", s, w)
	}
}

// TestCacheNamesFill checks that a catalogue of names, loaded without the
// addresses of the traceable list, keeps the list that has them.
func TestCacheNamesFill(t *testing.T) {
	fsys := cacheFixture(t)
	c, _ := newTestCache(t)
	cat, err := c.LoadNames(fsys, []string{"vfs_read"})
	if err != nil {
		t.Fatal(err)
	}
	cat.WriteCache()
	cat.waitCache()
	got, err := c.Load(withoutLists(fsys))
	if err != nil {
		t.Fatal(err)
	}
	if got.keep != nil || got.Source() != FromFilterAddrs {
		t.Errorf("after a load of names: hit %v, source %v", got.keep == nil, got.Source())
	}
	if s, w := summary(got), summary(load(t, fsys)); s != w {
		t.Errorf("catalogue from the cache differs:\n%s\nwant\n%s", s, w)
	}
}

func TestCacheKeyChanges(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		edit      func(fstest.MapFS)
	}{
		{"boot", "another boot", func(m fstest.MapFS) {
			m[bootIDPath] = &fstest.MapFile{Data: []byte("0c6a0d1e-5d4e-4f5a-8b2c-1d2e3f4a5b6c\n")}
		}},
		{"module loaded", "other modules", func(m fstest.MapFS) {
			m[modulesPath] = &fstest.MapFile{Data: []byte("dummy 16384 0 - Live 0xffffffffc0300000\n" + testModules)}
		}},
		{"module removed", "other modules", func(m fstest.MapFS) { delete(m, modulesPath) }},
		{"module loaded again", "other modules", func(m fstest.MapFS) {
			m[modulesPath] = &fstest.MapFile{Data: []byte(strings.Replace(testModules, "c0200000", "c0400000", 1))}
		}},
		{"module BTF", "other BTF", func(m fstest.MapFS) { m[btfDir+"/virtio_pci"] = &fstest.MapFile{Data: []byte("btf2")} }},
		{"vmlinux BTF", "other BTF", func(m fstest.MapFS) {
			f := m[btfDir+"/vmlinux"]
			m[btfDir+"/vmlinux"] = &fstest.MapFile{Data: append(slices.Clone(f.Data), 0)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := cacheFixture(t)
			c, _ := newTestCache(t)
			loadWritten(t, c, fsys)
			tc.edit(fsys)
			key, err := cacheKey(fsys)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.read(key); err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("read with the new key: %v, want %q", err, tc.why)
			}
			// Read from the kernel again, then kept.
			loadWritten(t, c, fsys)
			if _, err := c.read(key); err != nil {
				t.Errorf("not written again: %v", err)
			}
		})
	}
}

func TestCacheDamaged(t *testing.T) {
	fsys := cacheFixture(t)
	key, err := cacheKey(fsys)
	if err != nil {
		t.Fatal(err)
	}
	c, file := newTestCache(t)
	loadWritten(t, c, fsys)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, len(cacheMagic), len(cacheMagic) + 4, headerSize, headerSize + 5, len(good) / 2, len(good) - 1} {
		bad := slices.Clone(good)
		bad[at] ^= 0x20
		if err := os.WriteFile(file, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := c.read(key); err == nil {
			t.Errorf("byte %d flipped: read without error", at)
		}
		cat, err := c.Load(fsys)
		if err != nil || cat.keep == nil {
			t.Fatalf("byte %d flipped: load %v, miss %v", at, err, cat != nil && cat.keep != nil)
		}
		cat.WriteCache()
		cat.waitCache()
		if _, err := c.read(key); err != nil {
			t.Errorf("byte %d flipped: not written again: %v", at, err)
		}
	}
	for _, short := range []int{0, headerSize - 1, headerSize, len(good) - 1} {
		if _, err := decodeLists(good[:short], key); err == nil {
			t.Errorf("%d of %d bytes: decoded without error", short, len(good))
		}
	}
}

func TestCacheRefusesDirectory(t *testing.T) {
	fsys := cacheFixture(t)
	key, err := cacheKey(fsys)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("symlink", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "target")
		if err := os.Mkdir(target, 0o700); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		c := NewCache(link)
		cat := loadWritten(t, c, fsys)
		if entries, _ := os.ReadDir(target); len(entries) > 0 || cat == nil {
			t.Errorf("written through a symbolic link: %v", entries)
		}
		if err := c.write(key, &lists{source: FromFilterAddrs}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("write: %v", err)
		}
		if err := c.Clear(); err == nil {
			t.Error("clear through a symbolic link")
		}
	})
	t.Run("mode", func(t *testing.T) {
		c, file := newTestCache(t)
		loadWritten(t, c, fsys)
		if err := os.Chmod(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := c.read(key); err == nil || !strings.Contains(err.Error(), "mode 0700") {
			t.Errorf("directory of mode 0755: %v", err)
		}
		if err := c.write(key, &lists{source: FromFilterAddrs}); err == nil {
			t.Error("written in a directory of mode 0755")
		}
	})
	t.Run("owner", func(t *testing.T) {
		c, file := newTestCache(t)
		loadWritten(t, c, fsys)
		c.uid++
		if _, err := c.read(key); err == nil || !strings.Contains(err.Error(), "owner") {
			t.Errorf("directory of another owner: %v", err)
		}
		c.uid--
		if err := os.Chmod(file, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := c.read(key); err == nil {
			t.Error("file of mode 0644 read")
		}
	})
	t.Run("file symlink", func(t *testing.T) {
		c, file := newTestCache(t)
		loadWritten(t, c, fsys)
		other := filepath.Join(t.TempDir(), "other")
		if err := os.Rename(file, other); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(other, file); err != nil {
			t.Fatal(err)
		}
		if _, err := c.read(key); err == nil {
			t.Error("read through a symbolic link")
		}
	})
}

func TestCacheClear(t *testing.T) {
	fsys := cacheFixture(t)
	c, file := newTestCache(t)
	if err := c.Clear(); err != nil {
		t.Errorf("clear a missing cache: %v", err)
	}
	loadWritten(t, c, fsys)
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(file); !os.IsNotExist(err) {
		t.Errorf("after clear: %v", err)
	}
	loadWritten(t, c, fsys)
}
