// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Paths of the files that tell a boot, its BTF and its modules apart.
const (
	bootIDPath  = "proc/sys/kernel/random/boot_id"
	modulesPath = "proc/modules"
)

// cacheFile is the file of a Cache, in its directory; it is written to
// cacheFile.PID.tmp first, then renamed.
const cacheFile = "catalogue"

// cacheMagic starts a cache file, followed by cacheVersion (4 bytes), the
// CRC-32C of what follows (4 bytes) and that: the key, the source of the
// traceable list, kallsyms and the traceable list, each but the source as
// a uvarint length and its bytes. cacheVersion changes with the layout.
const (
	cacheMagic   = "trawlcat"
	cacheVersion = 1
	headerSize   = len(cacheMagic) + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Cache keeps the kernel's lists of symbols (/proc/kallsyms and the
// traceable list of tracefs), which the kernel takes most of a
// catalogue's load time to write, in a file of one directory, to be read
// back in one pass by the next catalogue loaded in the same boot.
//
// The file is used only when all of these hold, else it is ignored and
// written again: the directory is not a symbolic link, is owned by the
// user trawl runs as and has mode 0700; the file is a regular file of the
// same owner with mode 0600; it starts with cacheMagic and cacheVersion;
// the CRC-32C of the rest matches the one it holds (damage: a checksum
// catches no forgery, the directory's owner and mode keep others out);
// and its key is the running system's: the boot ID, the size of the BTF
// of vmlinux and of each module, and each loaded module's name, size,
// state and address. A new boot, a module loaded, removed or loaded
// again, or a change of BTF makes the whole file stale: the kernel lists
// a module's symbols only within its lists of every symbol, so a module's
// part costs reading them all again.
type Cache struct {
	dir string
	uid int
}

// NewCache returns the cache kept in dir, which it makes when it writes
// and dir is missing; dir's parent must exist.
func NewCache(dir string) *Cache {
	return &Cache{dir: dir, uid: os.Geteuid()}
}

// Load is like Load of the package, through the cache.
func (c *Cache) Load(fsys fs.FS) (*Catalogue, error) { return c.load(fsys, nil) }

// LoadNames is like LoadNames of the package, through the cache: a
// catalogue of every function kept serves one of some.
func (c *Cache) LoadNames(fsys fs.FS, names []string) (*Catalogue, error) {
	return c.load(fsys, newNameSet(names))
}

func (c *Cache) load(fsys fs.FS, keep *nameSet) (*Catalogue, error) {
	key, err := cacheKey(fsys)
	if err != nil {
		slog.Debug("catalogue cache unused", "dir", c.dir, "err", err)
		cat, _, err := loadKept(fsys, keep, nil)
		return cat, err
	}
	cat, read, err := loadKept(fsys, keep, func() *lists {
		start := time.Now()
		kept, err := c.read(key)
		if err != nil {
			slog.Debug("catalogue cache miss", "dir", c.dir, "why", err)
			return nil
		}
		slog.Debug("catalogue cache hit", "dir", c.dir, "read", round(time.Since(start)))
		return kept
	})
	if err == nil && read != nil {
		cat.keep = &cacheWrite{done: make(chan struct{}), write: func() { c.fill(fsys, key, read) }}
	}
	return cat, err
}

// fill writes lists read with key to the cache, with the traceable list
// that has the addresses when the kernel has it and lists has not.
func (c *Cache) fill(fsys fs.FS, key string, l *lists) {
	if l.source != FromFilterAddrs {
		if _, source, data, err := readTracefs(fsys, nil, traceableFiles[:1]); err == nil {
			l = &lists{kallsyms: l.kallsyms, traceable: data, source: source}
		}
	}
	if err := c.write(key, l); err != nil {
		slog.Warn("writing the catalogue cache", "err", err)
		return
	}
	slog.Debug("catalogue cache written", "dir", c.dir)
}

// Clear removes the cache's files; a missing directory is no error.
func (c *Cache) Clear() error {
	dir, err := c.openDir(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dir), c.dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", c.dir, err)
	}
	for _, name := range names {
		if name != cacheFile && !(strings.HasPrefix(name, cacheFile+".") && strings.HasSuffix(name, ".tmp")) {
			continue
		}
		if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: %w", path.Join(c.dir, name), err)
		}
	}
	return nil
}

// openDir opens the cache's directory, made first when create is set and
// it is missing, and checks it is no symbolic link, is owned by the
// cache's user and has mode 0700.
func (c *Cache) openDir(create bool) (int, error) {
	made := false
	if create {
		err := unix.Mkdir(c.dir, 0o700)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("make %s: %w", c.dir, err)
		}
		made = err == nil
	}
	dir, err := unix.Open(c.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, fmt.Errorf("%s is not a directory (a symbolic link?): not using it", c.dir)
	}
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: c.dir, Err: err}
	}
	if made {
		// Whatever the umask took away.
		err = unix.Fchmod(dir, 0o700)
	}
	var st unix.Stat_t
	if err == nil {
		err = unix.Fstat(dir, &st)
	}
	if err == nil && (st.Uid != uint32(c.uid) || st.Mode&0o7777 != 0o700) {
		err = fmt.Errorf("%s has owner %d and mode %#o, not owner %d and mode 0700: not using it", c.dir, st.Uid, st.Mode&0o7777, c.uid)
	}
	if err != nil {
		unix.Close(dir)
		return -1, fmt.Errorf("cache directory: %w", err)
	}
	return dir, nil
}

// read returns the lists kept for key, or why there are none to trust.
func (c *Cache) read(key string) (*lists, error) {
	dir, err := c.openDir(false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, cacheFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path.Join(c.dir, cacheFile), Err: err}
	}
	f := os.NewFile(uintptr(fd), path.Join(c.dir, cacheFile))
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(c.uid) || st.Mode&0o7777 != 0o600 {
		return nil, fmt.Errorf("%s is not a regular file of owner %d with mode 0600", f.Name(), c.uid)
	}
	data := make([]byte, st.Size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return decodeLists(data, key)
}

// decodeLists checks a cache file's contents and returns its lists.
func decodeLists(data []byte, key string) (*lists, error) {
	if len(data) < headerSize || string(data[:len(cacheMagic)]) != cacheMagic {
		return nil, errors.New("not a cache file")
	}
	rest := data[len(cacheMagic):]
	if v := binary.LittleEndian.Uint32(rest); v != cacheVersion {
		return nil, fmt.Errorf("version %d, not %d", v, cacheVersion)
	}
	body := data[headerSize:]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
		return nil, errors.New("damaged: checksum mismatch")
	}
	var fields [3][]byte
	var source byte
	for i := range fields {
		n, size := binary.Uvarint(body)
		if size <= 0 || n > uint64(len(body)-size) {
			return nil, errors.New("damaged: bad length")
		}
		fields[i], body = body[size:size+int(n)], body[size+int(n):]
		if i == 0 {
			if len(body) == 0 {
				return nil, errors.New("damaged: no source")
			}
			source, body = body[0], body[1:]
		}
	}
	if len(body) != 0 {
		return nil, errors.New("damaged: trailing bytes")
	}
	if why := keyChange(string(fields[0]), key); why != "" {
		return nil, errors.New(why)
	}
	l := &lists{kallsyms: fields[1], traceable: fields[2], source: Source(source)}
	if l.source != FromFilterAddrs && l.source != FromFilterNames {
		return nil, fmt.Errorf("damaged: unknown source %d", source)
	}
	return l, nil
}

// write replaces the cache's file by one of l for key, written to a new
// file first: a reader sees the old file or the new one.
func (c *Cache) write(key string, l *lists) error {
	dir, err := c.openDir(true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var head []byte
	head = binary.AppendUvarint(head, uint64(len(key)))
	head = append(head, key...)
	head = append(head, byte(l.source))
	head = binary.AppendUvarint(head, uint64(len(l.kallsyms)))
	mid := binary.AppendUvarint(nil, uint64(len(l.traceable)))
	parts := [][]byte{head, l.kallsyms, mid, l.traceable}
	var crc uint32
	for _, p := range parts {
		crc = crc32.Update(crc, castagnoli, p)
	}
	header := binary.LittleEndian.AppendUint32([]byte(cacheMagic), cacheVersion)
	header = binary.LittleEndian.AppendUint32(header, crc)

	tmp := fmt.Sprintf("%s.%d.tmp", cacheFile, os.Getpid())
	// A file left by a run of the same ID that was killed while writing.
	_ = unix.Unlinkat(dir, tmp, 0)
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "create", Path: path.Join(c.dir, tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), path.Join(c.dir, tmp))
	err = unix.Fchmod(fd, 0o600)
	w := bufio.NewWriter(f)
	for _, p := range append([][]byte{header}, parts...) {
		if err == nil {
			_, err = w.Write(p)
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, cacheFile)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return fmt.Errorf("write %s: %w", path.Join(c.dir, cacheFile), err)
	}
	return nil
}

// cacheKey describes what the kernel's lists depend on, one fact a line:
// the boot, the size of each BTF object and each loaded module.
func cacheKey(fsys fs.FS) (string, error) {
	boot, err := fs.ReadFile(fsys, bootIDPath)
	if err != nil {
		return "", fmt.Errorf("read the boot ID: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "boot %s\n", strings.TrimSpace(string(boot)))
	entries, err := fs.ReadDir(fsys, btfDir)
	if err != nil {
		return "", fmt.Errorf("list the kernel's BTF: %w", err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return "", fmt.Errorf("list the kernel's BTF: %w", err)
		}
		fmt.Fprintf(&b, "btf %s %d\n", e.Name(), info.Size())
	}
	// A kernel without modules has no /proc/modules.
	mods, _ := fs.ReadFile(fsys, modulesPath)
	for line := range strings.Lines(string(mods)) {
		// NAME SIZE REFCOUNT USERS STATE ADDRESS: the reference count
		// and users change as the module is used.
		if f := strings.Fields(line); len(f) >= 6 {
			fmt.Fprintf(&b, "module %s %s %s %s\n", f[0], f[1], f[4], f[5])
		}
	}
	return b.String(), nil
}

// keyChange says what differs between the key of a cache file and the
// running system's, "" when nothing does.
func keyChange(stored, current string) string {
	if stored == current {
		return ""
	}
	old, cur := strings.Split(stored, "\n"), strings.Split(current, "\n")
	for i := range max(len(old), len(cur)) {
		var o, c string
		if i < len(old) {
			o = old[i]
		}
		if i < len(cur) {
			c = cur[i]
		}
		if o == c {
			continue
		}
		what, _, _ := strings.Cut(cmp.Or(o, c), " ")
		switch what {
		case "boot":
			return "written in another boot"
		case "btf":
			return "written for other BTF"
		case "module":
			return "written with other modules loaded"
		}
		break
	}
	return "written for another system"
}

// cacheWrite writes a catalogue's lists to a cache once, in the
// background.
type cacheWrite struct {
	once  sync.Once
	done  chan struct{}
	write func()
}

// start begins writing, unless it has begun or been given up.
func (w *cacheWrite) start() {
	w.once.Do(func() {
		go func() {
			defer close(w.done)
			w.write()
		}()
	})
}

// wait waits for the write begun by start, and gives it up if it has not
// begun.
func (w *cacheWrite) wait() {
	w.once.Do(func() { close(w.done) })
	<-w.done
}

// WriteCache writes the kernel's lists this catalogue read to the cache it
// was loaded through, when they were not read from it, in the background;
// it returns at once. Callers start it once tracing is set up, so as not
// to slow it; the release of a catalogue held (Hold) waits for it.
func (c *Catalogue) WriteCache() {
	if c.keep != nil {
		c.keep.start()
	}
}

// waitCache waits for the write begun by WriteCache, and gives it up if
// it has not begun.
func (c *Catalogue) waitCache() {
	if c.keep != nil {
		c.keep.wait()
	}
}
