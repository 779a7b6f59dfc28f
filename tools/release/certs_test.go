// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/md5"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebianCABundle makes the bundle of a made-up ca-certificates
// package: its certificates in the order of their paths, and nothing
// else; then refuses a changed certificate, a file that is not one, and
// a machine without the package.
func TestDebianCABundle(t *testing.T) {
	root := t.TempDir()
	b, a := testCertificate(t, "B"), testCertificate(t, "A")
	certs := map[string][]byte{
		"usr/share/ca-certificates/mozilla/B.crt":  bytes.TrimSuffix(b, []byte("\n")),
		"usr/share/ca-certificates/mozilla/A.crt":  a,
		"usr/share/doc/ca-certificates/README.crt": []byte("not in the bundle"),
	}
	var sums strings.Builder
	for path, data := range certs {
		write(t, filepath.Join(root, path), data)
		sum := md5.Sum(data)
		sums.WriteString(hex.EncodeToString(sum[:]) + "  " + path + "\n")
	}
	// A certificate the machine added is not the package's.
	write(t, filepath.Join(root, "usr/local/share/ca-certificates/local.crt"), testCertificate(t, "local"))
	write(t, filepath.Join(root, "var/lib/dpkg/info/ca-certificates.md5sums"), []byte(sums.String()))
	write(t, filepath.Join(root, "var/lib/dpkg/status"), []byte(
		"Package: ca-certificates-java\nStatus: install ok installed\nVersion: 20230710\n\n"+
			"Package: ca-certificates\nStatus: install ok installed\nMulti-Arch: foreign\nVersion: 20230311+deb12u1\nDescription: Common CA certificates\n contains the certificate authorities\n"))

	ca, err := debianCABundle(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(a) + string(b); string(ca.pem) != want || ca.version != "20230311+deb12u1" {
		t.Errorf("bundle of ca-certificates %s:\n%s\nwant A then B:\n%s", ca.version, ca.pem, want)
	}
	if n := bytes.Count(ca.pem, []byte("-----BEGIN CERTIFICATE-----")); !x509.NewCertPool().AppendCertsFromPEM(ca.pem) || n != 2 {
		t.Errorf("the bundle holds %d certificates, want 2 that Go reads", n)
	}

	write(t, filepath.Join(root, "usr/share/ca-certificates/mozilla/B.crt"), b)
	if _, err := debianCABundle(root); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Errorf("with a changed certificate: %v, want an error saying it differs", err)
	}
	write(t, filepath.Join(root, "usr/share/ca-certificates/mozilla/B.crt"), certs["usr/share/ca-certificates/mozilla/B.crt"])

	if err := checkCertificates([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")); err == nil {
		t.Error("a private key passed for a certificate")
	}
	if err := checkCertificates(append(a, "trailing junk"...)); err == nil {
		t.Error("a certificate followed by junk passed")
	}

	write(t, filepath.Join(root, "var/lib/dpkg/status"), []byte("Package: ca-certificates\nStatus: deinstall ok config-files\nVersion: 20230311\n"))
	if _, err := debianCABundle(root); !errors.Is(err, errNoCAPackage) {
		t.Errorf("with the package removed: %v, want %v", err, errNoCAPackage)
	}
	if _, err := debianCABundle(t.TempDir()); !errors.Is(err, errNoCAPackage) || !strings.Contains(err.Error(), "apt-get install ca-certificates") {
		t.Errorf("without dpkg: %v, want %v", err, errNoCAPackage)
	}
}

// write writes a file, making its directory.
func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
