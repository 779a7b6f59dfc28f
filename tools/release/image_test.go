// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"maps"
	"math/big"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImage builds the image of two small payloads twice, checks that both
// archives are the same bytes and hold what they should, then pushes the
// image to a registry and reads the same index back.
func TestImage(t *testing.T) {
	tmp := t.TempDir()
	mtime := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	payloads := map[string]payload{}
	for _, arch := range arches {
		bin := filepath.Join(tmp, arch)
		if err := os.WriteFile(bin, []byte("trawl for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		payloads[arch] = payload{bin: bin, mtime: mtime, docs: []file{{"LICENSE", "../../LICENSE"}}}
	}
	const version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	ca := caBundle{pem: testCertificate(t, "test CA"), version: "20260101"}
	if _, err := imageIndex(payloads, caBundle{}, version, commit); err == nil {
		t.Error("an image without CA certificates was made")
	}
	var archives [2][]byte
	var idx v1.ImageIndex
	for i := range archives {
		var err error
		if idx, err = imageIndex(payloads, ca, version, commit); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(tmp, "image.tar")
		if err := writeImage(idx, path, version, mtime); err != nil {
			t.Fatal(err)
		}
		if archives[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two builds of the same payloads differ")
	}
	bins := checkImage(t, archives[0], version, commit, mtime, ca)
	for _, arch := range arches {
		if want := "trawl for " + arch; string(bins[arch]) != want {
			t.Errorf("%s image: binary %q, want %q", arch, bins[arch], want)
		}
	}

	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ref := u.Host + "/trawl-dev/trawl:1.2.3"
	if err := pushImage(t.Context(), idx, ref); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := pulled.Digest()
	want, _ := idx.Digest()
	if got != want {
		t.Errorf("the registry holds index %v, pushed %v", got, want)
	}
	if err := pushImage(t.Context(), idx, "Not A Reference"); err == nil || !strings.Contains(err.Error(), "image reference") {
		t.Errorf("pushing to a bad reference: %v, want an error naming the reference", err)
	}
}

// checkImage checks an image archive written by writeImage: an OCI layout
// whose index, tagged with the version, lists one image per architecture,
// each with its platform, entry point, labels, time and two layers: the
// CA certificates of ca at /etc/ssl/certs/ca-certificates.crt, then the
// binary and the licenses. It returns each architecture's binary.
func checkImage(t *testing.T, archive []byte, version, commit string, mtime time.Time, ca caBundle) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(mtime) || h.Uid != 0 {
			t.Errorf("%s: time %v, owner %d; want %v, root", h.Name, h.ModTime, h.Uid, mtime)
		}
		path := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(path, 0o755)
			continue
		}
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != strings.TrimPrefix(version, "v") {
		t.Fatalf("layout index %+v: want one index tagged %s", topManifest.Manifests, version)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string][]byte{}
	for _, d := range m.Manifests {
		arch := d.Platform.Architecture
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch || cfg.OS != "linux" || d.Platform.OS != "linux" {
			t.Errorf("%s image: config for %s/%s", arch, cfg.OS, cfg.Architecture)
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{imageBin}) || !cfg.Created.Time.Equal(mtime) {
			t.Errorf("%s image: entry point %v, created %v", arch, cfg.Config.Entrypoint, cfg.Created)
		}
		if l := cfg.Config.Labels; l["org.opencontainers.image.version"] != version || l["org.opencontainers.image.revision"] != commit {
			t.Errorf("%s image: labels %v", arch, l)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			t.Fatalf("%s image: %d layers (%v), want 2", arch, len(layers), err)
		}
		certs := layerFiles(t, layers[0])
		if !slices.Equal(slices.Sorted(maps.Keys(certs)), []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt"}) {
			t.Errorf("%s image: CA layer holds %v, want etc/ssl/certs/ca-certificates.crt", arch, slices.Sorted(maps.Keys(certs)))
		}
		bundle := certs["etc/ssl/certs/ca-certificates.crt"]
		if !bytes.Equal(bundle.data, ca.pem) || bundle.mode != 0o644 {
			t.Errorf("%s image: ca-certificates.crt of %d bytes, mode %o; want the %d bytes of the bundle, 0644", arch, len(bundle.data), bundle.mode, len(ca.pem))
		}
		if !x509.NewCertPool().AppendCertsFromPEM(bundle.data) {
			t.Errorf("%s image: ca-certificates.crt holds no certificate Go reads", arch)
		}
		if len(cfg.History) != 2 || !strings.Contains(cfg.History[0].CreatedBy, "ca-certificates "+ca.version) {
			t.Errorf("%s image: history %+v, want the CA layer's naming ca-certificates %s", arch, cfg.History, ca.version)
		}
		files := map[string][]byte{}
		for name, f := range layerFiles(t, layers[1]) {
			files[name] = f.data
			if name == "usr/bin/trawl" && f.mode != 0o755 {
				t.Errorf("%s image: the binary has mode %o", arch, f.mode)
			}
		}
		if _, ok := files["usr/share/doc/trawl/LICENSE"]; !ok {
			t.Errorf("%s image: no license in %v", arch, slices.Sorted(maps.Keys(files)))
		}
		bins[arch] = files["usr/bin/trawl"]
	}
	if len(bins) != len(arches) {
		t.Errorf("images for %v, want %v", bins, arches)
	}
	return bins
}

// layerFile is a file of a layer: its contents and mode.
type layerFile struct {
	data []byte
	mode int64
}

// layerFiles returns the files of a layer, by name.
func layerFiles(t *testing.T, layer v1.Layer) map[string]layerFile {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = layerFile{data, h.Mode}
	}
}

// testCertificate returns a self-signed certificate named cn, in PEM.
func testCertificate(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2046, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
