// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rpmutils "github.com/sassoftware/go-rpmutils"
)

// testManPage is the man page the test commits, to see it shipped.
const testManPage = ".TH TRAWL 1\n.SH NAME\ntrawl \\- release test page\n"

// TestRelease releases one commit twice and checks that both runs write
// the same bytes, that SHA256SUMS holds their hashes, and that the
// tarballs and packages hold what they should: the same static binary,
// stamped with the commit, which runs from the extracted .deb and .rpm;
// the docs; and the man page, which the commit adds to this repository's
// HEAD. The OCI image holds the same binaries.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds trawl four times; not in -short mode")
	}
	ctx := t.Context()
	tmp := t.TempDir()
	top, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(tmp, "repo")
	if _, err := git(ctx, top, "clone", "--quiet", "--shared", top, repo); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, manPage), []byte(testManPage), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := git(ctx, repo, "add", manPage); err != nil {
		t.Fatal(err)
	}
	if _, err := git(ctx, repo, "-c", "user.name=release test", "-c", "user.email=test@example.com",
		"commit", "--quiet", "-m", "Add a man page"); err != nil {
		t.Fatal(err)
	}
	commit, err := git(ctx, repo, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	mtime, err := sourceDate(ctx, repo, commit)
	if err != nil {
		t.Fatal(err)
	}

	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	names, err := release(ctx, options{repo: repo, rev: "HEAD", out: a})
	if err != nil {
		t.Fatal(err)
	}
	namesB, err := release(ctx, options{repo: repo, rev: commit, out: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("artefacts: %s", strings.Join(names, " "))
	if !slices.Equal(names, namesB) {
		t.Fatalf("the second run wrote %v, the first %v", namesB, names)
	}
	for _, name := range names {
		if !bytes.Equal(read(t, a, name), read(t, b, name)) {
			t.Errorf("%s differs between two runs on the same commit", name)
		}
	}
	checkSums(t, a, names)

	// Two .tar.gz, .deb and .rpm, the image and SHA256SUMS.
	if len(names) != 3*len(arches)+2 {
		t.Errorf("got %d artefacts, want 3 for each of %v, the image and SHA256SUMS", len(names), arches)
	}
	var imageBins map[string][]byte
	for _, arch := range arches {
		t.Run(arch, func(t *testing.T) {
			tarball := find(t, names, "_linux_"+arch+".tar.gz")
			bin := checkTarball(t, filepath.Join(a, tarball), mtime)
			version := checkBinary(t, bin, arch, commit)
			if imageBins == nil {
				image := find(t, names, "_oci.tar")
				if want := "trawl_" + strings.TrimPrefix(version, "v") + "_oci.tar"; image != want {
					t.Errorf("image %s, want %s", image, want)
				}
				ca, err := debianCABundle("/")
				if err != nil {
					t.Fatal(err)
				}
				imageBins = checkImage(t, read(t, a, image), version, commit, mtime, ca)
			}
			if !bytes.Equal(imageBins[arch], read(t, filepath.Dir(bin), filepath.Base(bin))) {
				t.Errorf("the %s image holds another binary than the tarball", arch)
			}
			if want := "trawl_" + strings.TrimPrefix(version, "v") + "_linux_" + arch + ".tar.gz"; tarball != want {
				t.Errorf("tarball %s, want %s", tarball, want)
			}
			deb := extractDeb(t, filepath.Join(a, find(t, names, "_"+arch+".deb")), arch, mtime)
			rpm := extractRPM(t, filepath.Join(a, find(t, names, "."+rpmArch(arch)+".rpm")), arch, mtime)
			for format, root := range map[string]string{"deb": deb, "rpm": rpm} {
				checkInstalled(t, root, format, repo, bin)
			}
			if arch == runtime.GOARCH {
				runTrawl(t, filepath.Join(deb, "usr/bin/trawl"), version, commit)
			}
		})
	}
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// find returns the one name ending in suffix.
func find(t *testing.T, names []string, suffix string) string {
	t.Helper()
	var found []string
	for _, name := range names {
		if strings.HasSuffix(name, suffix) {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one artefact named *%s, got %v", suffix, found)
	}
	return found[0]
}

// checkSums checks that dir/SHA256SUMS gives every other artefact's hash.
func checkSums(t *testing.T, dir string, names []string) {
	var want strings.Builder
	for _, name := range names {
		if name != "SHA256SUMS" {
			sum := sha256.Sum256(read(t, dir, name))
			fmt.Fprintf(&want, "%s  %s\n", hex.EncodeToString(sum[:]), name)
		}
	}
	if got := string(read(t, dir, "SHA256SUMS")); got != want.String() {
		t.Errorf("SHA256SUMS:\n%s\nwant\n%s", got, want.String())
	}
}

// checkTarball checks the tarball's entries, their modes, owners and times,
// and returns the path of the binary, extracted beside it.
func checkTarball(t *testing.T, path string, mtime time.Time) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	want := map[string]int64{dir + "/": 0o755, dir + "/trawl": 0o755, dir + "/trawl.1": 0o644}
	for _, d := range docs {
		want[dir+"/"+d.name] = 0o644
	}
	bin := strings.TrimSuffix(path, ".tar.gz") + ".trawl"
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		mode, ok := want[h.Name]
		if !ok {
			t.Errorf("%s: unexpected entry %s", path, h.Name)
			continue
		}
		delete(want, h.Name)
		if h.Mode != mode || h.Uid != 0 || h.Gid != 0 || h.Uname != "root" || !h.ModTime.Equal(mtime) {
			t.Errorf("%s: mode %o, owner %d:%d %s:%s, time %v; want %o, root, %v",
				h.Name, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, mode, mtime)
		}
		if h.Name == dir+"/trawl" {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range want {
		t.Errorf("%s: no %s", path, name)
	}
	return bin
}

// checkBinary checks that the binary is a static ELF for arch whose build
// info names the commit, clean, and returns its version.
func checkBinary(t *testing.T, bin, arch, commit string) string {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
		t.Errorf("machine %v, want %v", f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%v)", p.Type)
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for key, want := range map[string]string{"vcs.revision": commit, "vcs.modified": "false",
		"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": arch} {
		if settings[key] != want {
			t.Errorf("build setting %s = %q, want %q", key, settings[key], want)
		}
	}
	return bi.Main.Version
}

// extractDeb checks the .deb's architecture, extracts it with dpkg-deb into
// a directory it returns, and checks the files' modes and times.
func extractDeb(t *testing.T, deb, arch string, mtime time.Time) string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("no dpkg-deb to extract the .deb with")
	}
	out, err := exec.Command("dpkg-deb", "--field", deb, "Package", "Architecture").CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --field %s: %v\n%s", deb, err, out)
	}
	if want := "Package: trawl\nArchitecture: " + arch + "\n"; string(out) != want {
		t.Errorf("%s: fields\n%s\nwant\n%s", deb, out, want)
	}
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if !st.ModTime().Equal(mtime) || st.Mode() != fileMode(path) {
			t.Errorf("%s: %s has mode %v, time %v; want %v, %v", deb, path, st.Mode(), st.ModTime(), fileMode(path), mtime)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// fileMode is the mode a package gives the file at path.
func fileMode(path string) fs.FileMode {
	if strings.HasSuffix(path, "/usr/bin/trawl") {
		return 0o755
	}
	return 0o644
}

// rpmArch is RPM's name for a Go architecture.
func rpmArch(arch string) string {
	return map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
}

// extractRPM checks the .rpm's name, architecture and files' modes, owners
// and times, and extracts its payload into a directory it returns.
func extractRPM(t *testing.T, path, arch string, mtime time.Time) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rpm, err := rpmutils.ReadRpm(f)
	if err != nil {
		t.Fatal(err)
	}
	nevra, err := rpm.Header.GetNEVRA()
	if err != nil {
		t.Fatal(err)
	}
	if nevra.Name != "trawl" || nevra.Arch != rpmArch(arch) {
		t.Errorf("%s: name %s, arch %s; want trawl, %s", path, nevra.Name, nevra.Arch, rpmArch(arch))
	}
	files, err := rpm.Header.GetFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		mode := fs.FileMode(f.Mode() & 0o777)
		if f.Mode()&0o170000 == 0o100000 && mode != fileMode(f.Name()) ||
			f.UserName() != "root" || f.GroupName() != "root" || int64(f.Mtime()) != mtime.Unix() {
			t.Errorf("%s: %s has mode %o, owner %s:%s, time %d; want %v, root, %d",
				path, f.Name(), f.Mode(), f.UserName(), f.GroupName(), f.Mtime(), fileMode(f.Name()), mtime.Unix())
		}
	}
	root := t.TempDir()
	if err := rpm.ExpandPayload(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// checkInstalled checks the files a package of format installed under
// root: the binary bin, the docs of repo, its man pages, compressed, its
// systemd unit, and the completions.
func checkInstalled(t *testing.T, root, format, repo, bin string) {
	t.Helper()
	want := map[string][]byte{"usr/bin/trawl": read(t, filepath.Dir(bin), filepath.Base(bin))}
	for _, d := range docs {
		want["usr/share/doc/trawl/"+d.name] = read(t, repo, d.src)
	}
	for name, data := range want {
		if got := read(t, root, name); !bytes.Equal(got, data) {
			t.Errorf("%s: %s differs from what it should hold", root, name)
		}
	}
	for _, d := range packageDocs {
		want["usr/share/doc/trawl/"+d.name] = read(t, repo, d.src)
	}
	mds, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil || len(mds) == 0 {
		t.Fatalf("no docs/*.md in %s (%v)", repo, err)
	}
	for _, md := range mds {
		want["usr/share/doc/trawl/docs/"+filepath.Base(md)] = read(t, filepath.Dir(md), filepath.Base(md))
	}
	want["usr/lib/systemd/system/trawl.service"] = read(t, repo, unit)
	for name, data := range want {
		if got := read(t, root, name); !bytes.Equal(got, data) {
			t.Errorf("%s: %s differs from what it should hold", root, name)
		}
	}
	pages := map[string][]byte{"usr/share/man/man1/trawl.1.gz": []byte(testManPage)}
	for _, m := range manPages[1:] {
		pages["usr/share/man/man7/"+filepath.Base(m)+".gz"] = read(t, repo, m)
	}
	for name, want := range pages {
		zr, err := gzip.NewReader(bytes.NewReader(read(t, root, name)))
		if err != nil {
			t.Fatal(err)
		}
		if page, err := io.ReadAll(zr); err != nil || !bytes.Equal(page, want) {
			t.Errorf("%s: %s holds %.40q... (%v), want %.40q...", root, name, page, err, want)
		}
	}
	for _, sh := range shells {
		path := sh.deb
		if format == "rpm" {
			path = sh.rpm
		}
		if script := read(t, root, strings.TrimPrefix(path, "/")); !bytes.Contains(script, []byte("trawl")) {
			t.Errorf("%s: %s is not trawl's %s completion", root, path, sh.name)
		}
	}
}

// runTrawl runs the installed binary's --version: it must name the
// release's version and commit and exit 0.
func runTrawl(t *testing.T, bin, version, commit string) {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), "trawl "+version) || !strings.Contains(string(out), commit) {
		t.Errorf("%s --version does not say version %s, commit %s:\n%s", bin, version, commit, out)
	}
	t.Logf("%s --version: %s", bin, strconv.Quote(string(out)))
}

// TestPackageContents packs a payload of stand-in files as a .deb and an
// .rpm and lists what each installs: every file at its path, and nothing
// else (no script enables the unit).
func TestPackageContents(t *testing.T) {
	tmp := t.TempDir()
	stand := func(name string) string {
		path := filepath.Join(tmp, "src", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p := payload{bin: stand("trawl"), man: stand("trawl.1"), mtime: time.Unix(1700000000, 0).UTC()}
	for _, d := range docs {
		p.docs = append(p.docs, file{name: d.name, src: stand(d.name)})
	}
	p.extra = extras{
		docs:        []file{{"SECURITY.md", stand("SECURITY.md")}, {"docs/patterns.md", stand("docs/patterns.md")}},
		man:         []string{stand("trawl-patterns.7"), stand("trawl-filter.7")},
		completions: map[string]string{},
		unit:        stand("trawl.service"),
	}
	for _, sh := range shells {
		p.extra.completions[sh.name] = stand("completion." + sh.name)
	}
	common := []string{
		"/usr/bin/trawl",
		"/usr/share/doc/trawl/README.md", "/usr/share/doc/trawl/CHANGELOG.md",
		"/usr/share/doc/trawl/LICENSE", "/usr/share/doc/trawl/LICENSE.GPL-2.0",
		"/usr/share/doc/trawl/SECURITY.md", "/usr/share/doc/trawl/docs/patterns.md",
		"/usr/share/man/man1/trawl.1.gz",
		"/usr/share/man/man7/trawl-patterns.7.gz", "/usr/share/man/man7/trawl-filter.7.gz",
		"/usr/share/bash-completion/completions/trawl",
		"/usr/share/fish/vendor_completions.d/trawl.fish",
		"/usr/lib/systemd/system/trawl.service",
	}
	for _, tc := range []struct{ format, zsh string }{
		{"deb", "/usr/share/zsh/vendor-completions/_trawl"},
		{"rpm", "/usr/share/zsh/site-functions/_trawl"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			out := filepath.Join(tmp, tc.format)
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			name, err := p.pack(out, tc.format, "amd64", "v0.1.0", out)
			if err != nil {
				t.Fatal(err)
			}
			got := packageFiles(t, filepath.Join(out, name), tc.format)
			want := append(slices.Clone(common), tc.zsh)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s installs\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// packageFiles lists the regular files a package installs: with dpkg-deb
// -c for a .deb, from the header for an .rpm. It fails the test if the
// package has maintainer scripts.
func packageFiles(t *testing.T, path, format string) []string {
	t.Helper()
	var names []string
	if format == "deb" {
		if _, err := exec.LookPath("dpkg-deb"); err != nil {
			t.Skip("no dpkg-deb to list the .deb with")
		}
		out, err := exec.Command("dpkg-deb", "-c", path).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -c %s: %v", path, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 6 || !strings.HasPrefix(fields[0], "-") {
				continue
			}
			names = append(names, strings.TrimPrefix(fields[len(fields)-1], "."))
		}
		ctrl, err := exec.Command("dpkg-deb", "--ctrl-tarfile", path).Output()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(bytes.NewReader(ctrl))
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if base := filepath.Base(h.Name); slices.Contains([]string{"preinst", "postinst", "prerm", "postrm"}, base) {
				t.Errorf("%s has a %s script", path, base)
			}
		}
		return names
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rpm, err := rpmutils.ReadRpm(f)
	if err != nil {
		t.Fatal(err)
	}
	files, err := rpm.Header.GetFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Mode()&0o170000 == 0o100000 {
			names = append(names, f.Name())
		}
	}
	for _, tag := range []int{rpmutils.PREIN, rpmutils.POSTIN, rpmutils.PREUN, rpmutils.POSTUN} {
		if script, err := rpm.Header.GetString(tag); err == nil && script != "" {
			t.Errorf("%s has a script (tag %d): %q", path, tag, script)
		}
	}
	return names
}
