// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP receiver in the test process, over HTTP/protobuf
// and gRPC: what it receives is kept in order.
type receiver struct {
	tracepb.UnimplementedTraceServiceServer
	metricspb.UnimplementedMetricsServiceServer
	mu      sync.Mutex
	traces  []*tracepb.ExportTraceServiceRequest
	metrics []*metricspb.ExportMetricsServiceRequest
	// hold, if not nil, holds every request until it is closed: a
	// collector that does not answer.
	hold chan struct{}
}

func (r *receiver) wait(ctx context.Context) {
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
		}
	}
}

func (r *receiver) Export(ctx context.Context, req *tracepb.ExportTraceServiceRequest) (*tracepb.ExportTraceServiceResponse, error) {
	r.wait(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.traces = append(r.traces, req)
	return &tracepb.ExportTraceServiceResponse{}, nil
}

// metricsServer is the metrics service of a receiver (Export is taken).
type metricsServer struct{ *receiver }

func (m metricsServer) Export(ctx context.Context, req *metricspb.ExportMetricsServiceRequest) (*metricspb.ExportMetricsServiceResponse, error) {
	m.wait(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.metrics = append(m.metrics, req)
	return &metricspb.ExportMetricsServiceResponse{}, nil
}

// spans returns the spans received so far, resource by resource.
func (r *receiver) received() ([]*tracepb.ExportTraceServiceRequest, []*metricspb.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.ExportTraceServiceRequest(nil), r.traces...), append([]*metricspb.ExportMetricsServiceRequest(nil), r.metrics...)
}

// startHTTP serves r over HTTP/protobuf and returns its URL.
func (r *receiver) startHTTP(t *testing.T) string {
	mux := http.NewServeMux()
	handle := func(path string, msg func() proto.Message, export func(context.Context, proto.Message) proto.Message) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, req *http.Request) {
			body, err := io.ReadAll(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			m := msg()
			if err := proto.Unmarshal(body, m); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			out, _ := proto.Marshal(export(req.Context(), m))
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.Write(out)
		})
	}
	handle("/prefix/v1/traces", func() proto.Message { return &tracepb.ExportTraceServiceRequest{} }, func(ctx context.Context, m proto.Message) proto.Message {
		resp, _ := r.Export(ctx, m.(*tracepb.ExportTraceServiceRequest))
		return resp
	})
	handle("/prefix/v1/metrics", func() proto.Message { return &metricspb.ExportMetricsServiceRequest{} }, func(ctx context.Context, m proto.Message) proto.Message {
		resp, _ := metricsServer{r}.Export(ctx, m.(*metricspb.ExportMetricsServiceRequest))
		return resp
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		r.release()
		srv.Close()
	})
	return "http://" + srv.Listener.Addr().String() + "/prefix"
}

// startGRPC serves r over gRPC and returns its URL.
func (r *receiver) startGRPC(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	tracepb.RegisterTraceServiceServer(srv, r)
	metricspb.RegisterMetricsServiceServer(srv, metricsServer{r})
	go srv.Serve(ln)
	t.Cleanup(func() {
		r.release()
		srv.Stop()
	})
	return "grpc://" + ln.Addr().String()
}

var releaseMu sync.Mutex

// release lets the held requests go.
func (r *receiver) release() {
	releaseMu.Lock()
	defer releaseMu.Unlock()
	if r.hold != nil {
		select {
		case <-r.hold:
		default:
			close(r.hold)
		}
	}
}
