#!/bin/sh
# Regenerates the catalogue fixtures from real kernels. amd64 comes from the
# running kernel (run as root so kallsyms shows addresses); arm64 from the
# BTF and kallsyms the test bed dumps from an arm64 guest, when present.
set -eu
cd "$(dirname "$0")/../../.."
gen=./internal/kernel/testdata/gen
td=internal/kernel/testdata
rm -rf "$td/amd64"
go run "$gen" -btf /sys/kernel/btf/vmlinux -kallsyms /proc/kallsyms -list "$td/amd64.list" -out "$td/amd64"
if [ -f .cache/btf/arm64-7.3.btf ] && [ -f .cache/btf/arm64-7.3.kallsyms ]; then
	rm -rf "$td/arm64"
	go run "$gen" -btf .cache/btf/arm64-7.3.btf -kallsyms .cache/btf/arm64-7.3.kallsyms -list "$td/arm64.list" -out "$td/arm64"
fi
