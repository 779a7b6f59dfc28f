# trawl's build and test entry points. `make test` runs everything: the
# host unit tests and the privileged tests in every test bed guest.

GO      ?= go
KERNELS := amd64-6.1 amd64-6.12 amd64-7.3 arm64-6.12 arm64-7.3
# KERNEL picks the guests of `make vmtest`: one ID or a space-separated list.
KERNEL  ?= $(KERNELS)
export CGO_ENABLED := 0

.PHONY: all test unit vmtest tools fetch FORCE

all: tools

tools: bin/vmrun bin/guestinit-amd64 bin/guestinit-arm64

bin/vmrun: FORCE
	$(GO) build -o $@ ./internal/vmtest/vmrun

bin/guestinit-%: FORCE
	GOARCH=$* $(GO) build -o $@ ./internal/vmtest/guestinit

# tools and fetch come first so the runner tests in unit find the test bed.
test: tools fetch unit vmtest

# unit runs everything that needs no kernel, on the host.
unit:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) test ./...

fetch: bin/vmrun
	bin/vmrun -fetch -kernel $(shell echo $(KERNEL) | tr ' ' ',')

# vmtest runs the packages whose tests use internal/vmtest/guest in the
# guests named by KERNEL, one after the other, and fails if any fails.
vmtest: tools fetch
	@./internal/vmtest/suite $(KERNEL)
