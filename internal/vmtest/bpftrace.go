// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// FetchBpftrace downloads Debian's bpftrace for arch with the whole closure
// of packages it depends on (libc, LLVM, libbpf, ...), unpacks them into
// one directory of cache and returns it, or the directory unpacked there
// before. The benchmarks run it in guests, next to trawl, through the
// unpacked dynamic loader (guest.BpftraceCommand).
func FetchBpftrace(ctx context.Context, cache, arch string) (string, error) {
	return fetchPackage(ctx, cache, arch, "bpftrace", nil, "bpftrace")
}

// FetchPrometheus downloads Debian's prometheus (the server and promtool)
// for arch, with libc, the only library its Go binaries link, as
// FetchBpftrace does bpftrace: the metrics tests run them in guests
// (guest.Prometheus). (Its closure would take the web console's
// JavaScript packages, which apt cannot take for a foreign arch.)
func FetchPrometheus(ctx context.Context, cache, arch string) (string, error) {
	return fetchPackage(ctx, cache, arch, "prometheus", []string{"prometheus", "libc6"}, "prometheus", "promtool")
}

// FetchCoreutils downloads Debian's coreutils for arch, with libc6, as
// FetchPrometheus does prometheus: the user stack tests run its cat, a
// stripped, dynamically linked C program (guest.Coreutils).
func FetchCoreutils(ctx context.Context, cache, arch string) (string, error) {
	return fetchPackage(ctx, cache, arch, "coreutils", []string{"coreutils", "libc6"}, "cat")
}

// fetchPackage downloads Debian package pkg for arch, with its closure or
// (only not nil) exactly the packages only, unpacks them into one
// directory of cache and returns it, checking that each of the commands
// in usr/bin can run through the unpacked loader.
func fetchPackage(ctx context.Context, cache, arch, pkg string, only []string, commands ...string) (string, error) {
	dir := filepath.Join(cache, pkg, arch)
	root := filepath.Join(dir, "root")
	// manifest lists the unpacked packages; it is written last.
	manifest := filepath.Join(dir, "packages")
	if _, err := os.Stat(manifest); err == nil {
		return root, nil
	}
	unlock, err := lockCache(cache)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(manifest); err == nil {
		return root, nil
	}
	slog.Info("fetching a Debian package for the guests", "package", pkg, "arch", arch)
	apt, err := newAPT(ctx, filepath.Join(cache, "apt"))
	if err != nil {
		return "", err
	}
	var debs []string
	if only != nil {
		debs, err = apt.download(ctx, arch, only)
	} else {
		debs, err = apt.downloadClosure(ctx, arch, pkg, filepath.Join(dir, "debs"))
	}
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(root); err != nil {
		return "", err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	for _, deb := range debs {
		if err := command(ctx, "", "dpkg-deb", "-x", deb, root); err != nil {
			return "", fmt.Errorf("unpack %s: %w", filepath.Base(deb), err)
		}
	}
	for _, name := range commands {
		cmd, err := guest.DebianCommand(root, arch, name)
		if err != nil {
			return "", err
		}
		for _, file := range []string{cmd[0], cmd[len(cmd)-1]} {
			if _, err := os.Stat(file); err != nil {
				return "", fmt.Errorf("the %s packages for %s lack a file %s needs: %w", pkg, arch, name, err)
			}
		}
	}
	names := make([]string, len(debs))
	for i, deb := range debs {
		names[i] = filepath.Base(deb)
	}
	return root, os.WriteFile(manifest, []byte(strings.Join(names, "\n")+"\n"), 0o644)
}

// downloadClosure downloads pkg for arch and every package it depends on
// into dir, emptied first, and returns the files. The private status file
// lists no installed package, so apt fetches the whole closure.
func (a *apt) downloadClosure(ctx context.Context, arch, pkg, dir string) ([]string, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "partial"), 0o755); err != nil {
		return nil, err
	}
	args := append(slices.Clone(a.opts), "-o", "Dir::Cache::Archives="+dir,
		"-q", "-y", "--download-only", "--no-install-recommends", "install", pkg+":"+arch)
	if err := command(ctx, "", "apt-get", args...); err != nil {
		return nil, fmt.Errorf("download %s for %s with its dependencies: %w", pkg, arch, err)
	}
	debs, err := filepath.Glob(filepath.Join(dir, "*.deb"))
	if err != nil {
		return nil, err
	}
	if len(debs) == 0 {
		return nil, fmt.Errorf("apt-get downloaded no file for %s", pkg)
	}
	return debs, nil
}
