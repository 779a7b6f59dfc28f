module example.com/embedder

go 1.26.0

require github.com/trawl-dev/trawl v0.0.0

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/trawl-dev/trawl => ../..
