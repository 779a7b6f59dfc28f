// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// caPackage is the Debian package whose certificates the image carries.
const caPackage = "ca-certificates"

// caBundleFile is where the image holds the CA certificates: the first
// file Go's crypto/x509 reads on Linux, so that trawl's --otlp https://
// and grpcs:// verify a collector's certificate from a public CA.
const caBundleFile = "/etc/ssl/certs/ca-certificates.crt"

// caBundle is the image's CA certificates, as one PEM file.
type caBundle struct {
	pem []byte
	// version is the version of the package they come from.
	version string
}

// errNoCAPackage is returned when Debian's ca-certificates package is not
// installed.
var errNoCAPackage = errors.New("the image's CA certificates come from Debian's " + caPackage +
	" package, which is not installed (apt-get install " + caPackage + ")")

// debianCABundle makes the image's CA bundle from the certificates
// Debian's ca-certificates package installed under root (/ but in
// tests): every certificate it ships under /usr/share/ca-certificates,
// in the order of their paths, each checked against the package's
// checksums. It is what update-ca-certificates writes by default, less
// the machine's own additions (/usr/local/share/ca-certificates) and
// choices, which have no place in a released image; the same package
// version gives the same bytes.
func debianCABundle(root string) (caBundle, error) {
	version, err := installedVersion(filepath.Join(root, "var/lib/dpkg/status"), caPackage)
	if err != nil {
		return caBundle{}, err
	}
	sums, err := packageSums(root, caPackage)
	if err != nil {
		return caBundle{}, err
	}
	var paths []string
	for path := range sums {
		if strings.HasPrefix(path, "usr/share/ca-certificates/") && strings.HasSuffix(path, ".crt") {
			paths = append(paths, path)
		}
	}
	if len(paths) == 0 {
		return caBundle{}, fmt.Errorf("%s %s lists no certificates under /usr/share/ca-certificates", caPackage, version)
	}
	slices.Sort(paths)
	var bundle bytes.Buffer
	for _, path := range paths {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return caBundle{}, fmt.Errorf("%s %s: %w", caPackage, version, err)
		}
		if sum := md5.Sum(data); hex.EncodeToString(sum[:]) != sums[path] {
			return caBundle{}, fmt.Errorf("/%s differs from the one %s %s installed (reinstall the package)", path, caPackage, version)
		}
		if err := checkCertificates(data); err != nil {
			return caBundle{}, fmt.Errorf("/%s: %w", path, err)
		}
		bundle.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			bundle.WriteByte('\n')
		}
	}
	return caBundle{pem: bundle.Bytes(), version: version}, nil
}

// checkCertificates checks that data is PEM holding X.509 certificates
// and nothing else.
func checkCertificates(data []byte) error {
	n := 0
	for rest := data; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 || n == 0 {
				return errors.New("not a PEM certificate")
			}
			return nil
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("a PEM %s, want certificates", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return err
		}
	}
}

// installedVersion returns the version of package pkg that dpkg's status
// file says is installed, errNoCAPackage (for caPackage) when it is not.
func installedVersion(status, pkg string) (string, error) {
	data, err := os.ReadFile(status)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w: no dpkg database (%s)", errNoCAPackage, status)
	}
	if err != nil {
		return "", err
	}
	for stanza := range strings.SplitSeq(string(data), "\n\n") {
		fields := map[string]string{}
		for line := range strings.Lines(stanza) {
			if key, value, ok := strings.Cut(strings.TrimRight(line, "\n"), ": "); ok && !strings.HasPrefix(key, " ") {
				fields[key] = value
			}
		}
		if fields["Package"] == pkg && strings.HasSuffix(fields["Status"], " installed") && fields["Version"] != "" {
			return fields["Version"], nil
		}
	}
	return "", errNoCAPackage
}

// packageSums returns the MD5 sums dpkg keeps of an installed package's
// files, by path without the leading slash.
func packageSums(root, pkg string) (map[string]string, error) {
	info := filepath.Join(root, "var/lib/dpkg/info")
	path := filepath.Join(info, pkg+".md5sums")
	if _, err := os.Stat(path); err != nil {
		// A package of one architecture, installed as PKG:ARCH.
		matches, _ := filepath.Glob(filepath.Join(info, pkg+":*.md5sums"))
		if len(matches) != 1 {
			return nil, fmt.Errorf("no checksums of %s's files in %s", pkg, info)
		}
		path = matches[0]
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return nil, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		sums[file] = sum
	}
	return sums, sc.Err()
}
