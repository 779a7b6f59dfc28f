#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Regenerates the catalogue fixtures from real kernels. amd64 comes from the
# running kernel (run as root so kallsyms shows addresses); arm64 from the
# BTF the test bed dumps from an arm64 guest, with its kallsyms when present
# (else synthetic addresses); vmlinux.elf holds the amd64 BTF in an ELF file.
set -eu
cd "$(dirname "$0")/../../.."
gen=./internal/kernel/testdata/gen
td=internal/kernel/testdata
rm -rf "$td/amd64"
go run "$gen" -btf /sys/kernel/btf/vmlinux -kallsyms /proc/kallsyms -list "$td/amd64.list" -out "$td/amd64"
if [ -f .cache/btf/arm64-7.3.btf ]; then
	ksyms=""
	if [ -f .cache/btf/arm64-7.3.kallsyms ]; then ksyms=.cache/btf/arm64-7.3.kallsyms; fi
	rm -rf "$td/arm64"
	go run "$gen" -btf .cache/btf/arm64-7.3.btf -kallsyms "$ksyms" -list "$td/arm64.list" -out "$td/arm64"
fi
# The amd64 BTF again, in the .BTF section of an ELF file, as vmlinux holds
# it (for --btf).
tmp=$(mktemp -d)
echo 'int x;' >"$tmp/e.c"
clang-19 --target=x86_64-linux-gnu -c "$tmp/e.c" -o "$tmp/e.o"
objcopy --add-section .BTF="$td/amd64/sys/kernel/btf/vmlinux" --set-section-flags .BTF=readonly "$tmp/e.o" "$tmp/btf.o"
strip --keep-section=.BTF -o "$td/vmlinux.elf" "$tmp/btf.o"
rm -rf "$tmp"
