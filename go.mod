module github.com/trawl-dev/trawl

go 1.26.8

require (
	github.com/cavaliergopher/cpio v1.0.1 // indirect
	github.com/cilium/ebpf v0.22.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
