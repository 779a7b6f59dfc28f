// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestFunctionStatsMapped checks that FunctionStats reads the figures of
// hundreds of functions right, and leaves the map that holds them
// unmapped: mapped, the kernel puts every function's 2 KB in trawl's
// resident memory.
func TestFunctionStatsMapped(t *testing.T) {
	guest.Require(t)
	guest.Only(t, "reading the statistics through a window", "amd64-6.12", "arm64-7.3")
	// One kprobe-multi link attaches hundreds of functions in seconds
	// under emulation, where fentry takes minutes.
	cfg := Config{Patterns: []string{"vfs_*", "tcp_*"}, Backend: BackendKprobeMulti, Aggregate: true, Notify: func(n string) { t.Log(n) }}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 100 {
		os.ReadFile("/proc/version")
	}
	fs, err := s.FunctionStats()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var read, sum uint64
	for _, f := range fs {
		sum += f.Calls
		if f.Func == "vfs_read" {
			read = f.Calls
			if f.Latency.Count() == 0 || f.Latency.Count() > f.Calls || f.Total == 0 {
				t.Errorf("vfs_read: %d calls, a histogram of %d, %d ns in all", f.Calls, f.Latency.Count(), f.Total)
			}
		}
	}
	if read < 100 {
		t.Errorf("vfs_read counted %d times, want at least the 100 reads made", read)
	}
	if sum > st.Counted {
		t.Errorf("the functions' calls sum to %d, more than the %d counted before", sum, st.Counted)
	}
	statsSize := int64(st.Attached) * int64(unsafe.Sizeof(bpf.CaptureFuncStats{}))
	for _, size := range bpfMappings(t) {
		if size >= statsSize {
			t.Errorf("a BPF map mapping of %d bytes left after FunctionStats: the figures of %d functions take %d", size, st.Attached, statsSize)
		}
	}
}

// bpfMappings returns the sizes of the process's mappings of BPF maps.
func bpfMappings(t *testing.T) []int64 {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sizes []int64
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 6 || fields[5] != "anon_inode:bpf-map" {
			continue
		}
		from, to, _ := strings.Cut(fields[0], "-")
		a, _ := strconv.ParseInt(from, 16, 64)
		b, _ := strconv.ParseInt(to, 16, 64)
		sizes = append(sizes, b-a)
	}
	return sizes
}
