// SPDX-License-Identifier: Apache-2.0

// Command release builds trawl's release artefacts from one commit: static
// trawl binaries for linux/amd64 and linux/arm64, a tarball of each with
// the README, changelog, licenses and man page (docs/trawl.1, when the
// commit has one), .deb and .rpm packages, an OCI image of the binaries
// with the CA certificates of Debian's ca-certificates package as this
// machine has it installed, and a SHA256SUMS file. Two runs on the same
// commit, with the same version of that package, write the same bytes.
//
// It builds from a clean clone of the commit, so uncommitted changes are
// never released. The version is the one Go stamps into the binary from
// the repository: the tag v1.2.0 when the commit has it, else a Go
// pseudo-version (v0.0.0-20261123000533-e9895e4690ae). File times are
// SOURCE_DATE_EPOCH when set, else the commit's time.
//
// Usage, from the repository's top (make release runs it):
//
//	go -C tools/release run . [-rev REV] -o DIR
//
// It is a module of its own so that its packaging libraries stay out of
// trawl's go.mod.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
)

func main() {
	o := options{repo: "."}
	flag.StringVar(&o.rev, "rev", "HEAD", "the git revision to release")
	flag.StringVar(&o.out, "o", "", "write the artefacts to `DIR`, which must be empty or absent")
	flag.BoolVar(&o.imageOnly, "image", false, "write only the OCI image (an image layout in a tar archive)")
	flag.StringVar(&o.push, "push", "", "also push the image to the registry `REF`erence, e.g. ghcr.io/trawl-dev/trawl:1.2.0")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: release [-rev REV] [-image] [-push REF] -o DIR\n\nBuilds trawl's release artefacts for REV into DIR.")
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	names, err := release(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, name := range names {
		fmt.Println(filepath.Join(o.out, name))
	}
}
