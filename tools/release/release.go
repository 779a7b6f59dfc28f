// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// arches are the architectures trawl is released for.
var arches = []string{"amd64", "arm64"}

// docs are the files shipped beside the binary, by their path in the
// repository and their name in the tarball and in /usr/share/doc/trawl.
var docs = []struct{ src, name string }{
	{"README.md", "README.md"},
	{"CHANGELOG.md", "CHANGELOG.md"},
	{"LICENSE", "LICENSE"},
	{"internal/bpf/LICENSE.GPL-2.0", "LICENSE.GPL-2.0"},
}

// manPage is trawl's man page, shipped in the tarball and the packages
// when the commit has it.
const manPage = "docs/trawl.1"

// manPages are the man pages the packages install, gzipped, in
// /usr/share/man/manN for a page NAME.N: each that the commit has.
var manPages = []string{manPage, "docs/trawl-patterns.7", "docs/trawl-filter.7"}

// packageDocs are the files the packages install in /usr/share/doc/trawl
// besides docs: the security policy, and the documents of docs (*.md),
// in a directory docs there, so that the README's links hold.
var packageDocs = []struct{ src, name string }{
	{"SECURITY.md", "SECURITY.md"},
}

// unit is the systemd unit the packages install, not enabled: a service
// runs only once its administrator says what to trace.
const unit = "deploy/trawl.service"

// shells are the shells whose completion the packages install, with the
// path of the script in the deb and in the rpm (the distributions differ
// for zsh).
var shells = []struct{ name, deb, rpm string }{
	{"bash", "/usr/share/bash-completion/completions/trawl", "/usr/share/bash-completion/completions/trawl"},
	{"zsh", "/usr/share/zsh/vendor-completions/_trawl", "/usr/share/zsh/site-functions/_trawl"},
	{"fish", "/usr/share/fish/vendor_completions.d/trawl.fish", "/usr/share/fish/vendor_completions.d/trawl.fish"},
}

// Package metadata.
const (
	homepage    = "https://github.com/trawl-dev/trawl"
	description = "trace many kernel functions at once with one generic BPF program\n" +
		"trawl attaches one BPF program to kernel functions chosen by pattern,\n" +
		"reads every call's arguments and return value, decodes them with the\n" +
		"kernel's BTF, and streams or aggregates the calls."
	// The Go code is Apache-2.0; the BPF objects the binary embeds are
	// GPL-2.0, as the kernel requires for the helpers they call.
	license = "Apache-2.0 AND GPL-2.0-only"
)

// options say what to release, and where.
type options struct {
	repo string // a directory in the git repository
	rev  string // the revision to release
	out  string // the directory to write, which must be empty or absent
	// imageOnly writes only the OCI image, not the tarballs and packages.
	imageOnly bool
	// push, if not "", is the registry reference the image is pushed to.
	push string
}

// release builds the artefacts of o.rev into o.out and returns their names,
// SHA256SUMS last (with o.imageOnly, only the OCI image's).
func release(ctx context.Context, o options) ([]string, error) {
	top, err := git(ctx, o.repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	commit, err := git(ctx, top, "rev-parse", "--verify", o.rev+"^{commit}")
	if err != nil {
		return nil, err
	}
	mtime, err := sourceDate(ctx, top, commit)
	if err != nil {
		return nil, err
	}
	if err := emptyDir(o.out); err != nil {
		return nil, err
	}
	// Before the builds, so that a machine without them fails at once.
	ca, err := debianCABundle("/")
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the image: %w", err)
	}
	tmp, err := os.MkdirTemp("", "trawl-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	// A clone sharing the repository's objects, checked out at the commit:
	// Go stamps the version from its tags and sees no local changes.
	src := filepath.Join(tmp, "src")
	if _, err := git(ctx, top, "clone", "--quiet", "--shared", "--no-checkout", top, src); err != nil {
		return nil, err
	}
	if _, err := git(ctx, src, "checkout", "--quiet", "--detach", commit); err != nil {
		return nil, err
	}

	// What the packages add to the tarballs' files, the same for every
	// architecture: more docs, the man pages of section 7, the
	// completions, which a build for this machine writes, and the unit.
	extra, err := packageExtras(ctx, src, tmp)
	if err != nil {
		return nil, err
	}

	version := ""
	var names []string
	payloads := map[string]payload{}
	for _, arch := range arches {
		bin := filepath.Join(tmp, arch, "trawl")
		v, err := build(ctx, src, arch, bin)
		if err != nil {
			return nil, err
		}
		if version != "" && v != version {
			return nil, fmt.Errorf("the %s binary says version %s, the %s one %s", arches[0], version, arch, v)
		}
		version = v
		pkg := payload{bin: bin, mtime: mtime, extra: extra}
		for _, d := range docs {
			pkg.docs = append(pkg.docs, file{name: d.name, src: filepath.Join(src, d.src)})
		}
		if _, err := os.Stat(filepath.Join(src, manPage)); err == nil {
			pkg.man = filepath.Join(src, manPage)
		}
		payloads[arch] = pkg
		if o.imageOnly {
			continue
		}
		name := fmt.Sprintf("trawl_%s_linux_%s", strings.TrimPrefix(version, "v"), arch)
		if err := pkg.tarball(filepath.Join(o.out, name+".tar.gz"), name); err != nil {
			return nil, err
		}
		names = append(names, name+".tar.gz")
		for _, format := range []string{"deb", "rpm"} {
			name, err := pkg.pack(o.out, format, arch, version, filepath.Join(tmp, arch))
			if err != nil {
				return nil, err
			}
			names = append(names, name)
		}
	}
	idx, err := imageIndex(payloads, ca, version, commit)
	if err != nil {
		return nil, err
	}
	image := fmt.Sprintf("trawl_%s_oci.tar", strings.TrimPrefix(version, "v"))
	if err := writeImage(idx, filepath.Join(o.out, image), version, mtime); err != nil {
		return nil, err
	}
	names = append(names, image)
	if o.push != "" {
		if err := pushImage(ctx, idx, o.push); err != nil {
			return nil, err
		}
	}
	if o.imageOnly {
		return names, nil
	}
	slices.Sort(names)
	if err := writeSums(o.out, names); err != nil {
		return nil, err
	}
	return append(names, "SHA256SUMS"), nil
}

// git runs git in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// sourceDate is the time the artefacts' files carry: SOURCE_DATE_EPOCH
// when set, else the commit's time.
func sourceDate(ctx context.Context, repo, commit string) (time.Time, error) {
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		var err error
		if epoch, err = git(ctx, repo, "show", "--no-patch", "--format=%ct", commit); err != nil {
			return time.Time{}, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970: %w", epoch, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// emptyDir makes dir if it is absent, and fails if it holds anything, so
// that no earlier artefact is taken for a new one.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: remove it or name another directory", dir)
	}
	return nil
}

// build builds trawl for linux/arch from the work tree src into bin, static
// and without local paths, and returns the version Go stamped into it.
func build(ctx context.Context, src, arch, bin string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-ldflags=-s -w", "-o", bin, "./cmd/trawl")
	cmd.Dir = src
	// Pin what the environment could change in the output.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch,
		"GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building trawl for %s: %w\n%s", arch, err, out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("reading the build info of %s: %w", bin, err)
	}
	v := bi.Main.Version
	if !strings.HasPrefix(v, "v") || strings.HasSuffix(v, "+dirty") {
		return "", fmt.Errorf("the %s binary has version %q, want a release or pseudo-version of a clean commit", arch, v)
	}
	return v, nil
}

// file is a file of the release: its name in the tarball and its source.
type file struct{ name, src string }

// payload is what a tarball or package of one architecture holds.
type payload struct {
	bin   string    // the trawl binary
	docs  []file    // README, changelog and licenses
	man   string    // the man page, "" if the commit has none
	mtime time.Time // every file's time
	extra extras    // what the packages install besides
}

// extras are the files the packages install beyond the tarball's.
type extras struct {
	docs        []file            // in /usr/share/doc/trawl, by their name there
	man         []string          // the man pages other than trawl.1
	completions map[string]string // the script of each shell, by its name
	unit        string            // the systemd unit, "" if the commit has none
}

// packageExtras gathers the extras of the work tree src, with scratch
// files in tmp.
func packageExtras(ctx context.Context, src, tmp string) (extras, error) {
	var e extras
	for _, d := range packageDocs {
		if _, err := os.Stat(filepath.Join(src, d.src)); err == nil {
			e.docs = append(e.docs, file{name: d.name, src: filepath.Join(src, d.src)})
		}
	}
	mds, err := filepath.Glob(filepath.Join(src, "docs", "*.md"))
	if err != nil {
		return e, err
	}
	for _, md := range mds {
		e.docs = append(e.docs, file{name: "docs/" + filepath.Base(md), src: md})
	}
	for _, m := range manPages[1:] {
		if _, err := os.Stat(filepath.Join(src, m)); err == nil {
			e.man = append(e.man, filepath.Join(src, m))
		}
	}
	if _, err := os.Stat(filepath.Join(src, unit)); err == nil {
		e.unit = filepath.Join(src, unit)
	}
	// The completions come from trawl's own completion command, which
	// writes the same script on every architecture: a build for this
	// machine runs it.
	bin := filepath.Join(tmp, "host", "trawl")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/trawl")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return e, fmt.Errorf("building trawl for this machine: %w\n%s", err, out)
	}
	e.completions = map[string]string{}
	for _, sh := range shells {
		out, err := exec.CommandContext(ctx, bin, "completion", sh.name).Output()
		if err != nil {
			return e, fmt.Errorf("trawl completion %s: %w", sh.name, err)
		}
		path := filepath.Join(tmp, "host", "completion."+sh.name)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return e, err
		}
		e.completions[sh.name] = path
	}
	return e, nil
}

// tarball writes the payload as a gzipped tarball at path, its files in
// the directory dir.
func (p payload) tarball(path, dir string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(p.header(dir+"/", 0o755, 0, tar.TypeDir)); err != nil {
		return err
	}
	entries := append([]file{{"trawl", p.bin}}, p.docs...)
	if p.man != "" {
		entries = append(entries, file{"trawl.1", p.man})
	}
	for _, e := range entries {
		data, err := os.ReadFile(e.src)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if e.src == p.bin {
			mode = 0o755
		}
		if err := tw.WriteHeader(p.header(dir+"/"+e.name, mode, int64(len(data)), tar.TypeReg)); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// pack writes the payload as a package of format (deb or rpm) for arch into
// dir, with scratch files in tmp, and returns the package's file name.
func (p payload) pack(dir, format, arch, version, tmp string) (name string, err error) {
	contents := files.Contents{p.content(p.bin, "/usr/bin/trawl", 0o755)}
	for _, d := range p.docs {
		contents = append(contents, p.content(d.src, "/usr/share/doc/trawl/"+d.name, 0o644))
	}
	for _, d := range p.extra.docs {
		contents = append(contents, p.content(d.src, "/usr/share/doc/trawl/"+d.name, 0o644))
	}
	pages := p.extra.man
	if p.man != "" {
		pages = append([]string{p.man}, pages...)
	}
	for _, page := range pages {
		name := filepath.Base(page)
		gz := filepath.Join(tmp, name+".gz")
		if err := gzipFile(page, gz); err != nil {
			return "", err
		}
		section := name[strings.LastIndexByte(name, '.')+1:]
		contents = append(contents, p.content(gz, "/usr/share/man/man"+section+"/"+name+".gz", 0o644))
	}
	for _, sh := range shells {
		if script, ok := p.extra.completions[sh.name]; ok {
			dst := sh.deb
			if format == "rpm" {
				dst = sh.rpm
			}
			contents = append(contents, p.content(script, dst, 0o644))
		}
	}
	if p.extra.unit != "" {
		contents = append(contents, p.content(p.extra.unit, "/usr/lib/systemd/system/trawl.service", 0o644))
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:            "trawl",
		Arch:            arch,
		Platform:        "linux",
		Version:         version,
		Release:         "1",
		Section:         "utils",
		Priority:        "optional",
		Maintainer:      "The trawl authors",
		Description:     description,
		Homepage:        homepage,
		License:         license,
		MTime:           p.mtime,
		DisableGlobbing: true,
		Overridables: nfpm.Overridables{
			Contents: contents,
			RPM:      nfpm.RPM{BuildHost: "localhost", Summary: strings.SplitN(description, "\n", 2)[0]},
		},
	})
	packager, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	name = packager.ConventionalFileName(info)
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := packager.Package(info, f); err != nil {
		return "", fmt.Errorf("making the %s package for %s: %w", format, arch, err)
	}
	return name, nil
}

// content is one file of a package, owned by root, with the payload's time.
func (p payload) content(src, dst string, mode fs.FileMode) *files.Content {
	return &files.Content{Source: src, Destination: dst,
		FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: p.mtime}}
}

// gzipFile compresses src into dst, with no name or time in the header.
func gzipFile(src, dst string) (err error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	return zw.Close()
}

// writeSums writes dir/SHA256SUMS for the named files, in the format
// `sha256sum -c` reads.
func writeSums(dir string, names []string) error {
	var b strings.Builder
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
