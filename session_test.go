// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/event"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// fakeRing hands out its records, then ErrClosed.
type fakeRing struct{ records [][]byte }

func (f *fakeRing) ReadInto(r *ringbuf.Record) error {
	if len(f.records) == 0 {
		return ringbuf.ErrClosed
	}
	r.RawSample, f.records = f.records[0], f.records[1:]
	return nil
}
func (f *fakeRing) Flush() error          { return nil }
func (f *fakeRing) SetDeadline(time.Time) {}
func (f *fakeRing) Close() error          { return nil }

// TestReadSkipsMalformed checks that Read skips records that do not
// decode, counts them as Malformed, and returns the good ones around them.
func TestReadSkipsMalformed(t *testing.T) {
	u64 := &btf.Int{Name: "u64", Size: 8}
	fn := &btf.Func{Name: "f", Type: &btf.FuncProto{Return: u64, Params: []btf.FuncParam{{Name: "x", Type: u64}}}}
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	record := func(id uint32, x uint64) []byte {
		r := bpf.CaptureRecord{Func: id, Flags: uint8(bpf.CaptureRecFlagREC_ENTRY), EntryTs: 1, ExitTs: 2}
		r.Slots[0] = x
		return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))...)
	}
	long := record(0, 3)
	long[unsafe.Offsetof(bpf.CaptureRecord{}.DataLen)] = 200 // more data than sent
	s := &Session{
		reader: &fakeRing{records: [][]byte{
			[]byte("short"), record(0, 1), record(7, 0), long, record(0, 2), {},
		}},
		plans:   []*plan.Plan{p},
		decoder: event.NewDecoder([]*plan.Plan{p}, decode.Options{}, nil),
	}
	var c Call
	for _, want := range []uint64{1, 2} {
		if err := s.Read(context.Background(), &c); err != nil {
			t.Fatalf("Read: %v, want the call with x=%d", err, want)
		}
		if c.Func != "f" || len(c.Args) != 1 || c.Args[0].Bits != want {
			t.Errorf("call %s %+v, want f with x=%d", c.Func, c.Args, want)
		}
	}
	if err := s.Read(context.Background(), &c); !errors.Is(err, ErrClosed) {
		t.Errorf("Read at the end: %v, want ErrClosed", err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Received != 6 || st.Malformed != 4 || st.Discarded != 0 {
		t.Errorf("received %d, malformed %d, discarded %d: want 6, 4, 0", st.Received, st.Malformed, st.Discarded)
	}
}

// blockingRing is a ring buffer reader with nothing to read: ReadInto
// holds its lock and blocks, as cilium/ebpf's does, until Flush, Close or
// a deadline.
type blockingRing struct {
	mu       sync.Mutex
	deadline time.Time
	flushed  chan struct{}
	closed   chan struct{}
}

func newBlockingRing() *blockingRing {
	return &blockingRing{flushed: make(chan struct{}, 1), closed: make(chan struct{})}
}

func (b *blockingRing) ReadInto(*ringbuf.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var timeout <-chan time.Time
	if !b.deadline.IsZero() {
		timeout = time.After(time.Until(b.deadline))
	}
	select {
	case <-b.flushed:
		return ringbuf.ErrFlushed
	case <-b.closed:
		return ringbuf.ErrClosed
	case <-timeout:
		return os.ErrDeadlineExceeded
	}
}

func (b *blockingRing) Flush() error {
	select {
	case b.flushed <- struct{}{}:
	default:
	}
	return nil
}

func (b *blockingRing) SetDeadline(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deadline = t
}

func (b *blockingRing) Close() error {
	close(b.closed)
	b.mu.Lock()
	defer b.mu.Unlock()
	return nil
}

// TestCloseWhileReadBlocks checks that Close returns while a Read blocks
// in the reader, that the Read then returns ErrClosed, and that Stats and
// FunctionStats may be called meanwhile (run with -race).
func TestCloseWhileReadBlocks(t *testing.T) {
	s := &Session{reader: newBlockingRing()}
	read := make(chan error, 1)
	go func() {
		var c Call
		read <- s.Read(context.Background(), &c)
	}()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
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
				if _, err := s.FunctionStats(); !errors.Is(err, ErrNotAggregating) {
					t.Errorf("FunctionStats: %v, want ErrNotAggregating", err)
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- s.close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a Read blocked")
	}
	select {
	case err := <-read:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Read: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
	close(done)
	wg.Wait()
	if n, err := s.Discard(); n != 0 || err != nil {
		t.Errorf("Discard after Close: %d, %v", n, err)
	}
}
