module github.com/trawl-dev/trawl

go 1.26.0

require (
	github.com/cavaliergopher/cpio v1.0.1
	github.com/cilium/ebpf v0.22.0
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
)

require google.golang.org/protobuf v1.36.12

tool (
	github.com/cilium/ebpf/cmd/bpf2go
	google.golang.org/protobuf/cmd/protoc-gen-go
)
