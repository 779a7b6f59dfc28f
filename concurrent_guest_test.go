// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestCloseWhileReading checks that Close returns while another
// goroutine blocks in Read, which then returns ErrClosed, and that Stats
// and FunctionStats called all along from other goroutines, and Stop
// called with Close, return live figures, then the final ones.
func TestCloseWhileReading(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "Close while reading", "amd64-5.10")
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, aggregate := range []bool{false, true} {
		name := "send"
		if aggregate {
			name = "aggregate"
		}
		t.Run(name, func(t *testing.T) {
			// bpf_fentry_test1 is called only by BPF_PROG_TEST_RUN: a Read
			// of the sending session blocks; the aggregating one sends
			// nothing, and counts the reads of the workload below.
			cfg := Config{Patterns: []string{"bpf_fentry_test1", "vfs_read"}, Aggregate: aggregate, RingBufferSize: 1 << 20, Notify: func(n string) { t.Log(n) }}
			if !aggregate {
				cfg.Patterns = cfg.Patterns[:1]
			}
			s, err := open(t.Context(), cat, cfg, backend.LiveProbe)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					s.close()
				}
			}()
			read := make(chan error, 1)
			go func() {
				var c call.Call
				read <- s.Read(t.Context(), &c)
			}()
			done := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-done:
							return
						default:
						}
						if _, err := s.Stats(); err != nil {
							t.Errorf("Stats: %v", err)
						}
						if _, err := s.FunctionStats(); err != nil && (aggregate || !errors.Is(err, ErrNotAggregating)) {
							t.Errorf("FunctionStats: %v", err)
						}
						os.ReadFile("/proc/self/stat")
					}
				})
			}
			time.Sleep(200 * time.Millisecond)
			select {
			case err := <-read:
				t.Fatalf("Read returned %v before Close", err)
			default:
			}
			start := time.Now()
			wg.Go(func() {
				if err := s.Stop(); err != nil {
					t.Errorf("Stop: %v", err)
				}
			})
			closeErr := make(chan error, 1)
			go func() { closeErr <- s.close() }()
			select {
			case err := <-closeErr:
				closed = true
				if err != nil {
					t.Errorf("Close: %v", err)
				}
				t.Logf("Close returned after %v", time.Since(start))
			case <-time.After(20 * time.Second):
				t.Fatal("Close did not return while a Read blocked")
			}
			select {
			case err := <-read:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("Read returned %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Read still blocked after Close")
			}
			close(done)
			wg.Wait()
			var c call.Call
			if err := s.Read(t.Context(), &c); !errors.Is(err, ErrClosed) {
				t.Errorf("Read after Close returned %v, want ErrClosed", err)
			}
			st, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.Attached == 0 {
				t.Error("the final Stats count no function attached")
			}
			if aggregate {
				fs, err := s.FunctionStats()
				if err != nil {
					t.Fatal(err)
				}
				if len(fs) == 0 || st.Counted == 0 {
					t.Errorf("final FunctionStats of %d functions, %d calls counted: want the workload's reads", len(fs), st.Counted)
				}
			}
		})
	}
}
