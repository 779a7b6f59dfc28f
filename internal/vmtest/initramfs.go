// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// baseArchive returns the cached base initramfs of a kernel: the guest init
// and the modules it loads. It is rebuilt when the init changes.
func baseArchive(ctx context.Context, cache string, u *Unpacked, initPath string) (string, error) {
	init, err := os.ReadFile(initPath)
	if err != nil {
		return "", fmt.Errorf("read the guest init: %w", err)
	}
	// The modules named are part of the key, as they change what the
	// archive holds.
	sum := sha256.Sum256(append(init, strings.Join(append(guestModules, spareModule), " ")...))
	file := filepath.Join(cache, "kernels", u.ID, "base-"+hex.EncodeToString(sum[:6])+".cpio")
	if _, err := os.Stat(file); err == nil {
		now := time.Now()
		os.Chtimes(file, now, now) // used: see pruneBases
		return file, nil
	}
	mods, err := resolveModules(ctx, u, guestModules)
	if err != nil {
		return "", err
	}
	a := newArchive()
	a.file("/init", 0o755, init)
	var list strings.Builder
	for _, m := range mods {
		p := "/lib/modules/" + m.name + ".ko"
		a.file(p, 0o644, m.data)
		fmt.Fprintln(&list, p)
	}
	a.file(guest.ModulesList, 0o644, []byte(list.String()))
	spare, err := resolveModules(ctx, u, []string{spareModule})
	if err != nil {
		return "", err
	}
	if len(spare) == 1 {
		a.file(guest.SpareModule, 0o644, spare[0].data)
	}
	data, err := a.bytes()
	if err != nil {
		return "", err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", err
	}
	pruneBases(filepath.Dir(file), file)
	return file, nil
}

// pruneBases removes the base archives of other guest inits that no run
// used for a day: each build of the init that differs makes one (5 MB a
// kernel), and a cache kept across many changes would grow without end.
// A run reads its base archive as it starts.
func pruneBases(dir, keep string) {
	bases, _ := filepath.Glob(filepath.Join(dir, "base-*.cpio"))
	for _, f := range bases {
		if info, err := os.Stat(f); err == nil && f != keep && time.Since(info.ModTime()) > 24*time.Hour {
			os.Remove(f)
		}
	}
}

// runArchive returns the per-run initramfs: the run spec and the binary.
func runArchive(spec guest.Spec, binary []byte) ([]byte, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	a := newArchive()
	a.file(guest.SpecPath, 0o644, js)
	a.file(spec.Args[0], 0o755, binary)
	return a.bytes()
}

// archive writes a newc cpio archive, creating parent directories as
// needed: the kernel's unpacker does not.
type archive struct {
	buf  bytes.Buffer
	w    *cpio.Writer
	dirs map[string]bool
	err  error
}

func newArchive() *archive {
	a := &archive{dirs: map[string]bool{"/": true}}
	a.w = cpio.NewWriter(&a.buf)
	return a
}

func (a *archive) dir(p string) {
	if a.dirs[p] {
		return
	}
	a.dir(path.Dir(p))
	a.dirs[p] = true
	a.header(&cpio.Header{Name: p[1:], Mode: cpio.TypeDir | 0o755})
}

func (a *archive) file(p string, mode cpio.FileMode, data []byte) {
	a.dir(path.Dir(p))
	a.header(&cpio.Header{Name: p[1:], Mode: cpio.TypeReg | mode, Size: int64(len(data))})
	if a.err == nil {
		_, a.err = a.w.Write(data)
	}
}

func (a *archive) header(h *cpio.Header) {
	if a.err == nil {
		a.err = a.w.WriteHeader(h)
	}
}

// bytes closes the archive and pads it to 512 bytes, so archives can be
// concatenated.
func (a *archive) bytes() ([]byte, error) {
	if a.err == nil {
		a.err = a.w.Close()
	}
	if a.err != nil {
		return nil, fmt.Errorf("write initramfs: %w", a.err)
	}
	if n := a.buf.Len() % 512; n != 0 {
		a.buf.Write(make([]byte, 512-n))
	}
	return a.buf.Bytes(), nil
}

// concat writes the files and then extra to dst.
func concat(dst string, extra []byte, files ...string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	for _, f := range files {
		in, err := os.Open(f)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	if _, err := out.Write(extra); err != nil {
		return err
	}
	return out.Close()
}
