# SPDX-License-Identifier: Apache-2.0

# trawl's build and test entry points. `make test` runs everything: the
# host unit tests and the privileged tests in every test bed guest.

GO      ?= go
KERNELS := amd64-5.10 amd64-6.1 amd64-6.12 amd64-7.3 arm64-5.10 arm64-6.12 arm64-7.3
# KERNEL picks the guests of `make vmtest`: one ID or a space-separated list.
KERNEL  ?= $(KERNELS)
export CGO_ENABLED := 0

.PHONY: all test unit fuzz vmtest tools fetch demo readme-features bpf bpf-check browser FORCE

all: tools

tools: bin/vmrun bin/guestinit-amd64 bin/guestinit-arm64

bin/vmrun: FORCE
	$(GO) build -o $@ ./internal/vmtest/vmrun

# The guest init is built without VCS stamps: the test bed caches one base
# initramfs per build of it (see internal/vmtest/initramfs.go), which a
# stamp would make new at every commit.
bin/guestinit-%: FORCE
	GOARCH=$* $(GO) build -buildvcs=false -o $@ ./internal/vmtest/guestinit

# tools and fetch come first so the runner tests in unit find the test bed;
# release-check (CPU) runs while fetch downloads (network).
test: bpf-check tools browser
	$(MAKE) -j2 --no-print-directory fetch release-check
	$(MAKE) --no-print-directory unit vmtest

# unit runs everything that needs no kernel, on the host; the tests run
# under the race detector, which needs cgo.
unit:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) -C tools/release vet ./...
	CGO_ENABLED=1 $(GO) test -race ./...
	@$(MAKE) --no-print-directory fuzz

# browser installs the headless Chromium that the HTML report's test in
# unit opens the page in (cmd/trawl/browser_test.go, which skips without
# it): Debian's chromium-headless-shell, which sends no request of its
# own: 96 MB with chromium-common, 19 s with apt-get update on a Debian 12
# machine that had the libraries it links.
browser:
	@command -v chromium-headless-shell >/dev/null || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -q -y --no-install-recommends chromium-headless-shell; }

# fuzz runs each fuzz target for FUZZTIME beyond its seeds (the seeds run
# with the tests), one after the other: under 2 minutes in all, builds
# included. Every fuzz target of the repository must be listed here.
FUZZTIME ?= 15s
FUZZ_TARGETS := FuzzDecode:./internal/decode FuzzRecord:./internal/event FuzzFilter:./internal/filter FuzzParse:./internal/selector
fuzz:
	@test "$$(grep -rh --include='*_test.go' '^func Fuzz' . | wc -l)" = "$(words $(FUZZ_TARGETS))" || \
		{ echo "make fuzz: a fuzz target is not in FUZZ_TARGETS:"; grep -rn --include='*_test.go' '^func Fuzz' .; exit 1; }
	@for t in $(FUZZ_TARGETS); do \
		echo "$(GO) test -run='^$$' -fuzz=^$${t%%:*}\$$ -fuzztime=$(FUZZTIME) $${t#*:}"; \
		$(GO) test -run='^$$' -fuzz="^$${t%%:*}\$$" -fuzztime=$(FUZZTIME) $${t#*:} || exit 1; \
	done

# The guest that runs the OpenTelemetry tests (internal/vmtest/suite)
# needs the collector, built while the kernels download.
fetch: bin/vmrun
	bin/vmrun -fetch -kernel $(shell echo $(KERNEL) | tr ' ' ',') $(if $(filter amd64-6.1,$(KERNEL)),-fetch-otelcol amd64)

# vmtest runs the packages whose tests use internal/vmtest/guest in the
# guests named by KERNEL, one after the other, and fails if any fails.
vmtest: tools fetch
	@./internal/vmtest/suite $(KERNEL)

# trawl, static, for each architecture of the test bed.
bin/trawl-%: FORCE
	GOARCH=$* $(GO) build -o $@ ./cmd/trawl

# demo is the main job on a machine whose own kernel refuses BPF: trawl
# in a throwaway guest, tracing its small built-in workload. DEMO_ARGS
# replaces the flags and patterns; --workload is added unless DEMO_ARGS
# names a command after a `--` word, so that the guest never traces an
# idle system until the runner's timeout.
DEMO_KERNEL ?= amd64-6.12
DEMO_ARGS   ?= 'do_sys_openat2' 'vfs_read' 'vfs_write' 'tcp_sendmsg' 'tcp_recvmsg' 'inet_*connect' 'do_mmap'
DEMO_WORKLOAD = $(if $(filter --,$(DEMO_ARGS)),,--workload)
demo: tools bin/trawl-amd64 bin/trawl-arm64
	@bin/vmrun -fetch -kernel $(DEMO_KERNEL)
	bin/vmrun -kernel $(DEMO_KERNEL) bin/trawl-$(firstword $(subst -, ,$(DEMO_KERNEL))) $(DEMO_WORKLOAD) $(DEMO_ARGS)

# readme-features probes every guest and rewrites the README's table.
readme-features: tools fetch bin/trawl-amd64 bin/trawl-arm64
	./internal/vmtest/readme-features $(KERNELS)

# bpf rebuilds the BPF objects with the pinned clang; bpf-check fails when
# the committed objects differ from what the sources build.
BPF_PACKAGES := clang-19 llvm-19 libbpf-dev
bpf:
	@command -v clang-19 >/dev/null && test -e /usr/include/bpf/bpf_helpers.h || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -q -y --no-install-recommends $(BPF_PACKAGES); }
	$(GO) generate ./internal/bpf ./cmd/trawl-bench/floor

bpf-check: bpf
	@git diff --exit-code --stat internal/bpf cmd/trawl-bench/floor || { echo "committed BPF objects are stale: run make bpf and commit"; exit 1; }

# soak traces every traceable function system-wide for a minute with
# --stats while a mixed workload runs, in each guest named by KERNEL that
# has kprobe.session or kprobe.multi, and checks trawl stops on time,
# every call is accounted for and nothing stays patched, also after
# kill -9 (TestSoak in cmd/trawl; make test runs it at a smaller size).
.PHONY: soak
soak: tools fetch
	@failed=; for k in $(KERNEL); do \
		TRAWL_SOAK=full GOARCH=$${k%%-*} go test -count=1 -v -timeout 90m -run '^TestSoak$$' \
			-exec "$(CURDIR)/bin/vmrun -timeout 80m -kernel $$k" ./cmd/trawl || failed="$$failed $$k"; \
	done; test -z "$$failed" || { echo "soak failed on:$$failed"; exit 1; }

# bench runs cmd/trawl-bench in each guest named by KERNEL, one after the
# other, and prints Markdown tables (docs/benchmarks.md holds measured
# ones). BENCH_PARTS picks the parts: calls, the per-call cost, in a guest
# whose clock counts emulated instructions (vmrun -icount), so that it does
# not drift with host load; attach, the attach times, in an ordinary guest
# with Debian's bpftrace shared in for comparison; reader, the records per
# second trawl reads against a consuming-only reader, and the drops of a
# traced loop, in an ordinary guest. BENCH_ARGS passes
# flags, e.g. BENCH_ARGS='-rounds 9'.
.PHONY: bench
BENCH_PARTS ?= calls attach
BENCH_ARGS ?=
bench: tools fetch bin/trawl-bench-amd64 bin/trawl-bench-arm64 bin/trawl-amd64 bin/trawl-arm64
	@failed=; for k in $(KERNEL); do b=bin/trawl-bench-$${k%%-*}; \
		case " $(BENCH_PARTS) " in *" calls "*) \
			bin/vmrun -icount -kernel $$k $$b -skip-attach -skip-overview -skip-reader $(BENCH_ARGS) || failed="$$failed $$k(calls)";; esac; \
		case " $(BENCH_PARTS) " in *" attach "*) \
			bin/vmrun -timeout 60m -kernel $$k -bpftrace $$b -skip-calls -skip-reader $(BENCH_ARGS) || failed="$$failed $$k(attach)";; esac; \
		case " $(BENCH_PARTS) " in *" reader "*) \
			bin/vmrun -kernel $$k $$b -skip-calls -skip-attach -skip-overview $(BENCH_ARGS) || failed="$$failed $$k(reader)";; esac; \
	done; test -z "$$failed" || { echo "bench failed on:$$failed"; exit 1; }

bin/trawl-bench-%: FORCE
	GOARCH=$* $(GO) build -o $@ ./cmd/trawl-bench

# release writes the release artefacts of the commit HEAD points at into
# dist/: static binaries, tarballs, .deb and .rpm packages for amd64 and
# arm64, the OCI image, and SHA256SUMS (tools/release says how).
# release-check builds a commit twice, compares the bytes, runs trawl from
# the packages, and checks deploy/ (the systemd unit and its exposure, the
# Kubernetes objects).
.PHONY: release release-check image ca-certificates
release: ca-certificates
	rm -rf dist
	$(GO) -C tools/release run . -o $(CURDIR)/dist

# image builds trawl's OCI image (the static binaries and CA certificates
# on an empty base, one image per architecture) as
# dist/image/trawl_VERSION_oci.tar, without a container daemon;
# IMAGE_PUSH=REGISTRY/trawl:TAG pushes it too.
image: ca-certificates
	rm -rf dist/image
	$(GO) -C tools/release run . -image $(if $(IMAGE_PUSH),-push $(IMAGE_PUSH)) -o $(CURDIR)/dist/image

release-check: ca-certificates
	$(GO) -C tools/release test -count=1 ./...

# The image carries the CA certificates of Debian's ca-certificates
# package, as installed (tools/release/certs.go), for --otlp over TLS.
ca-certificates:
	@test -e /var/lib/dpkg/info/ca-certificates.md5sums || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -q -y --no-install-recommends ca-certificates; }

# man rewrites docs/trawl.1 from the command line's flag definitions, and
# docs/trawl-patterns.7 and docs/trawl-filter.7 from docs/patterns.md and
# docs/filter.md; a test of cmd/trawl fails when a committed page is stale.
.PHONY: man
man:
	$(GO) run ./cmd/trawl __man docs
