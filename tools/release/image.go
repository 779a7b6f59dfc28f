// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageBin is where the image holds the binary, its entry point.
const imageBin = "/usr/bin/trawl"

// imageIndex returns trawl's OCI image: an index of one image per
// architecture, each two layers on an empty base: the CA certificates of
// ca, then the static binary and the licenses. Everything in it is
// derived from its inputs, its times from p.mtime, so the same commit
// (and CA certificates) give the same digests. It is built with
// go-containerregistry, without a container daemon.
func imageIndex(bins map[string]payload, ca caBundle, version, commit string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		p, ok := bins[arch]
		if !ok {
			return nil, fmt.Errorf("no %s binary for the image", arch)
		}
		img, err := p.image(arch, ca, version, commit)
		if err != nil {
			return nil, fmt.Errorf("making the %s image: %w", arch, err)
		}
		platform := &v1.Platform{OS: "linux", Architecture: arch}
		if arch == "arm64" {
			platform.Variant = "v8"
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform}})
	}
	return idx, nil
}

// image returns the payload's image for arch, with the CA certificates
// of ca.
func (p payload) image(arch string, ca caBundle, version, commit string) (v1.Image, error) {
	if len(ca.pem) == 0 {
		return nil, errors.New("no CA certificates for the image")
	}
	caTar, err := p.caLayerTar(ca)
	if err != nil {
		return nil, err
	}
	binTar, err := p.layerTar()
	if err != nil {
		return nil, err
	}
	caLayer, err := tarLayer(caTar)
	if err != nil {
		return nil, err
	}
	binLayer, err := tarLayer(binTar)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: p.mtime}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: []string{imageBin},
			Labels: map[string]string{
				"org.opencontainers.image.title":    "trawl",
				"org.opencontainers.image.source":   homepage,
				"org.opencontainers.image.version":  version,
				"org.opencontainers.image.revision": commit,
				"org.opencontainers.image.licenses": license,
			},
		},
	}
	if arch == "arm64" {
		cfg.Variant = "v8"
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer:     caLayer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "trawl release " + version + ": " + caBundleFile + " from Debian's " + caPackage + " " + ca.version},
	}, mutate.Addendum{
		Layer:     binLayer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "trawl release " + version},
	})
}

// tarLayer returns an uncompressed tar archive as an OCI layer.
func tarLayer(data []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// caLayerTar returns the image's first layer, uncompressed: the CA
// certificates at caBundleFile, for --otlp over TLS.
func (p payload) caLayerTar(ca caBundle) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	name := strings.TrimPrefix(caBundleFile, "/")
	var dirs []string
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		dirs = append([]string{dir + "/"}, dirs...)
	}
	for _, dir := range dirs {
		if err := tw.WriteHeader(p.header(dir, 0o755, 0, tar.TypeDir)); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(p.header(name, 0o644, int64(len(ca.pem)), tar.TypeReg)); err != nil {
		return nil, err
	}
	if _, err := tw.Write(ca.pem); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layerTar returns the image's second layer, uncompressed: the binary at
// imageBin and the documents under /usr/share/doc/trawl.
func (p payload) layerTar() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"usr/", "usr/bin/", "usr/share/", "usr/share/doc/", "usr/share/doc/trawl/"} {
		if err := tw.WriteHeader(p.header(dir, 0o755, 0, tar.TypeDir)); err != nil {
			return nil, err
		}
	}
	entries := []file{{strings.TrimPrefix(imageBin, "/"), p.bin}}
	for _, d := range p.docs {
		entries = append(entries, file{"usr/share/doc/trawl/" + d.name, d.src})
	}
	for _, e := range entries {
		data, err := os.ReadFile(e.src)
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if e.src == p.bin {
			mode = 0o755
		}
		if err := tw.WriteHeader(p.header(e.name, mode, int64(len(data)), tar.TypeReg)); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// header is the tar header of a file of the payload, owned by root, with
// the payload's time.
func (p payload) header(name string, mode, size int64, typ byte) *tar.Header {
	return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: p.mtime,
		Uname: "root", Gname: "root", Format: tar.FormatUSTAR}
}

// writeImage writes idx at path as an OCI image layout in a tar archive
// (what `skopeo copy oci-archive:PATH ...` and `podman load` read), the
// index tagged with version, its entries sorted and timed at mtime.
func writeImage(idx v1.ImageIndex, path, version string, mtime time.Time) (err error) {
	dir, err := os.MkdirTemp("", "trawl-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	tag := strings.TrimPrefix(version, "v")
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return fmt.Errorf("writing the image layout: %w", err)
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	tw := tar.NewWriter(f)
	// WalkDir goes in lexical order, so the archive is the same each time.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: rel, Mode: 0o644, ModTime: mtime, Uname: "root", Gname: "root", Format: tar.FormatPAX, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = rel+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// pushImage pushes idx to the registry reference ref (for example
// ghcr.io/trawl-dev/trawl:1.2.0), with the credentials of the user's
// docker or podman configuration.
func pushImage(ctx context.Context, idx v1.ImageIndex, ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing the image to %s: %w", ref, err)
	}
	return nil
}
