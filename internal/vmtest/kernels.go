// SPDX-License-Identifier: Apache-2.0

// Package vmtest is trawl's test bed: it fetches Debian kernel packages,
// builds initramfs archives around a static guest init, and boots QEMU
// guests (software emulation) that run one binary as root and report its
// exit status. The host kernel refuses BPF tracing programs, so every test
// that loads BPF runs through this package.
package vmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Kernel is one kernel of the test bed matrix.
type Kernel struct {
	// ID names the kernel, e.g. "amd64-6.12".
	ID string
	// Arch is the GOARCH of the kernel and of the binaries it runs.
	Arch string
	// image matches the package holding the kernel image; its first group
	// is the version that the other packages share.
	image *regexp.Regexp
	// extra are further packages, with %s for the version.
	extra []string
}

// Kernels is the test bed matrix, oldest first per architecture.
var Kernels = []Kernel{
	{ID: "amd64-5.10", Arch: "amd64", image: regexp.MustCompile(`^linux-image-(5\.10\.0-\d+)-amd64-unsigned$`)},
	{ID: "amd64-6.1", Arch: "amd64", image: regexp.MustCompile(`^linux-image-(6\.1\.0-\d+)-amd64-unsigned$`)},
	{ID: "amd64-6.12", Arch: "amd64", image: regexp.MustCompile(`^linux-image-(6\.12\.\d+\+deb12)-amd64-unsigned$`)},
	{ID: "amd64-7.3", Arch: "amd64", image: regexp.MustCompile(`^linux-binary-unsigned-(7\.3\.\d+\+deb13)-amd64$`),
		extra: []string{"linux-base-%s-amd64", "linux-modules-%s-amd64"}},
	{ID: "arm64-5.10", Arch: "arm64", image: regexp.MustCompile(`^linux-image-(5\.10\.0-\d+)-arm64-unsigned$`)},
	{ID: "arm64-6.12", Arch: "arm64", image: regexp.MustCompile(`^linux-image-(6\.12\.\d+\+deb12)-arm64-unsigned$`)},
	{ID: "arm64-7.3", Arch: "arm64", image: regexp.MustCompile(`^linux-binary-unsigned-(7\.3\.\d+\+deb13)-arm64$`),
		extra: []string{"linux-base-%s-arm64", "linux-modules-%s-arm64"}},
}

// ErrUnknownKernel is returned for a kernel ID that is not in Kernels.
var ErrUnknownKernel = errors.New("unknown test bed kernel")

// LookupKernel returns the kernel with the given ID.
func LookupKernel(id string) (Kernel, error) {
	for _, k := range Kernels {
		if k.ID == id {
			return k, nil
		}
	}
	ids := make([]string, len(Kernels))
	for i, k := range Kernels {
		ids[i] = k.ID
	}
	return Kernel{}, fmt.Errorf("%w %q (have %s)", ErrUnknownKernel, id, strings.Join(ids, ", "))
}

// Unpacked is a kernel whose packages are downloaded and unpacked.
type Unpacked struct {
	Kernel `json:"-"`
	// Release is the kernel release (uname -r).
	Release string `json:"release"`
	// Packages are the Debian packages it came from.
	Packages []string `json:"packages"`
	// Image is the kernel image to boot.
	Image string `json:"image"`
	// Modules is the directory of the kernel's modules.
	Modules string `json:"modules"`
}

// aptSources are the Debian suites the kernels come from. They go in a
// private apt configuration so the machine's own apt setup is untouched.
const aptSources = `deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bullseye-security main
deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
`

// Fetch downloads and unpacks the newest packages of k into cache, or
// returns the copy unpacked there before.
func Fetch(ctx context.Context, cache string, k Kernel) (*Unpacked, error) {
	dir := filepath.Join(cache, "kernels", k.ID)
	manifest := filepath.Join(dir, "kernel.json")
	if u, err := readManifest(manifest, k); err == nil {
		return u, nil
	}
	unlock, err := lockCache(cache)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have fetched it while we waited for the lock.
	if u, err := readManifest(manifest, k); err == nil {
		return u, nil
	}
	slog.Info("fetching test bed kernel", "kernel", k.ID)
	apt, err := newAPT(ctx, filepath.Join(cache, "apt"))
	if err != nil {
		return nil, err
	}
	builds, err := apt.packages(ctx, k)
	if err != nil {
		return nil, err
	}
	// The newest build may be listed and yet missing from the mirror (a
	// security update not synced yet): fall back to the next newest.
	var pkgs, debs []string
	var errs []error
	for _, pkgs = range builds[:min(len(builds), fetchTries)] {
		debs, err = apt.download(ctx, k.Arch, pkgs)
		if err == nil {
			break
		}
		slog.Warn("test bed kernel build not downloadable, trying the next newest", "kernel", k.ID, "packages", pkgs, "err", err)
		errs = append(errs, err)
	}
	if debs == nil {
		return nil, fmt.Errorf("download kernel %s: %w", k.ID, errors.Join(errs...))
	}
	root := filepath.Join(dir, "root")
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	for _, deb := range debs {
		if err := command(ctx, "", "dpkg-deb", "-x", deb, root); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", filepath.Base(deb), err)
		}
	}
	u := &Unpacked{Kernel: k, Packages: pkgs}
	if err := u.locate(root); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(u, "", "\t")
	if err != nil {
		return nil, err
	}
	return u, os.WriteFile(manifest, data, 0o644)
}

func readManifest(path string, k Kernel) (*Unpacked, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &Unpacked{Kernel: k}
	return u, json.Unmarshal(data, u)
}

// locate finds the kernel image and modules in an unpacked tree. Debian 12
// packages put the image in /boot and modules in /lib/modules; Debian 13's
// merged /usr puts both in /usr/lib/modules/RELEASE.
func (u *Unpacked) locate(root string) error {
	for _, base := range []string{"lib/modules", "usr/lib/modules"} {
		entries, _ := os.ReadDir(filepath.Join(root, base))
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(root, base, e.Name(), "kernel")); err == nil {
				u.Release = e.Name()
				u.Modules = filepath.Join(root, base, e.Name())
			}
		}
	}
	if u.Release == "" {
		return fmt.Errorf("no modules directory in the packages of %s", u.ID)
	}
	for _, img := range []string{
		filepath.Join(root, "boot", "vmlinuz-"+u.Release),
		filepath.Join(u.Modules, "vmlinuz"),
		filepath.Join(u.Modules, "vmlinuz.unsigned"),
	} {
		if _, err := os.Stat(img); err == nil {
			u.Image = img
			return nil
		}
	}
	return fmt.Errorf("no kernel image in the packages of %s", u.ID)
}

// lockCache serialises fetches and archive builds between processes.
func lockCache(cache string) (func(), error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the test bed cache: %w", err)
	}
	return func() { f.Close() }, nil
}

// apt runs apt-get and apt-cache with a private configuration.
type apt struct {
	dir  string
	opts []string
}

var aptUpdated sync.Once

func newAPT(ctx context.Context, dir string) (*apt, error) {
	for _, d := range []string{"lists/partial", "cache/archives/partial", "debs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	sources := filepath.Join(dir, "sources.list")
	if err := os.WriteFile(sources, []byte(aptSources), 0o644); err != nil {
		return nil, err
	}
	status := filepath.Join(dir, "status")
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return nil, err
	}
	a := &apt{dir: dir, opts: []string{
		"-o", "Dir::Etc::SourceList=" + sources,
		"-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + filepath.Join(dir, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
		"-o", "Dir::State::status=" + status,
		"-o", "APT::Architectures::=amd64",
		"-o", "APT::Architectures::=arm64",
		"-o", "Debug::NoLocking=1",
		// Downloads go to a directory the _apt user cannot write.
		"-o", "APT::Sandbox::User=root",
	}}
	var err error
	aptUpdated.Do(func() {
		err = command(ctx, "", "apt-get", append(a.opts, "-q", "update")...)
	})
	if err != nil {
		return nil, fmt.Errorf("update the package lists: %w", err)
	}
	return a, nil
}

// fetchTries is how many builds of a kernel Fetch tries, newest first.
const fetchTries = 8

// packages returns the packages of each build of k the package lists
// have, newest first.
func (a *apt) packages(ctx context.Context, k Kernel) ([][]string, error) {
	prefix, _, _ := strings.Cut(k.image.String()[1:], "(")
	out, err := exec.CommandContext(ctx, "apt-cache", append(a.opts, "pkgnames", prefix)...).Output()
	if err != nil {
		return nil, fmt.Errorf("list packages %s*: %w", prefix, err)
	}
	type build struct{ name, version string }
	var builds []build
	for _, name := range strings.Fields(string(out)) {
		if m := k.image.FindStringSubmatch(name); m != nil {
			builds = append(builds, build{name, m[1]})
		}
	}
	if len(builds) == 0 {
		return nil, fmt.Errorf("no package matches %s for kernel %s", k.image, k.ID)
	}
	slices.SortFunc(builds, func(x, y build) int {
		switch {
		case versionLess(y.version, x.version):
			return -1
		case versionLess(x.version, y.version):
			return 1
		}
		return 0
	})
	var pkgs [][]string
	for _, b := range builds {
		p := []string{b.name}
		for _, e := range k.extra {
			p = append(p, fmt.Sprintf(e, b.version))
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func (a *apt) download(ctx context.Context, arch string, pkgs []string) ([]string, error) {
	debs := filepath.Join(a.dir, "debs")
	args := append([]string{}, a.opts...)
	args = append(args, "-q", "download")
	for _, p := range pkgs {
		args = append(args, p+":"+arch)
	}
	if err := command(ctx, debs, "apt-get", args...); err != nil {
		return nil, fmt.Errorf("download %s: %w", strings.Join(pkgs, " "), err)
	}
	var files []string
	for _, p := range pkgs {
		m, _ := filepath.Glob(filepath.Join(debs, p+"_*_"+arch+".deb"))
		if len(m) == 0 {
			return nil, fmt.Errorf("apt-get downloaded no file for %s", p)
		}
		files = append(files, m[len(m)-1])
	}
	return files, nil
}

// versionLess compares versions by their runs of digits as numbers.
func versionLess(a, b string) bool {
	digits := regexp.MustCompile(`\d+|\D+`)
	as, bs := digits.FindAllString(a, -1), digits.FindAllString(b, -1)
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] == bs[i] {
			continue
		}
		an, aerr := strconv.Atoi(as[i])
		bn, berr := strconv.Atoi(bs[i])
		if aerr == nil && berr == nil {
			return an < bn
		}
		return as[i] < bs[i]
	}
	return len(as) < len(bs)
}

// command runs a command, with its output in the error when it fails.
func command(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}
