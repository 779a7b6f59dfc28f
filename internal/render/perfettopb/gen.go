// SPDX-License-Identifier: Apache-2.0

// Package perfettopb holds the Go types of the part of Perfetto's trace
// format that trawl writes (Trace, TracePacket, TrackEvent and what they
// refer to), generated from trimmed copies of Perfetto's .proto files
// under protos/ (Apache-2.0, see protos/LICENSE; each file names the
// upstream path and commit it came from). render.PerfettoProto writes
// this format; the tests read it back with these types.
//
// go generate needs protoc (Debian's protobuf-compiler) and runs the
// protoc-gen-go that go.mod pins as a tool; the generated files are
// committed, so go build needs neither.
package perfettopb

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --go_out=. --go_opt=module=github.com/trawl-dev/trawl/internal/render/perfettopb -I. protos/perfetto/*/*.proto protos/perfetto/trace/*/*.proto"
