// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"os"
	"testing"

	"github.com/trawl-dev/trawl/internal/backend"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// maxVerified is the most instructions the verifier may process for one
// program loaded for many functions. Each capture checked apart in the
// capture loop once took a kprobe.multi entry program to about 166,000
// (seconds of load under emulation); trawl_capture, checked once, to
// about 5,600 (amd64-7.3).
const maxVerified = 40_000

// TestVerifiedInstructions loads the capture program with each backend
// that loads one program for many functions, lean and full, and checks
// how much verifier work each of its programs took (Linux 5.16 reports
// it).
func TestVerifiedInstructions(t *testing.T) {
	guest.Require(t)
	cat, release, err := kernel.Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	configs := map[string]Config{
		"lean": {Patterns: []string{"vfs_read", "tcp_sendmsg"}},
		// A trace of some processes loads the full build.
		"full": {Patterns: []string{"vfs_read", "tcp_sendmsg"}, PIDs: []int{os.Getpid()}},
	}
	for _, b := range backend.All() {
		if b.Needs() != nil || len(b.Keeps) == 0 {
			continue
		}
		for name, cfg := range configs {
			t.Run(string(b.Name)+"/"+name, func(t *testing.T) {
				cfg.Backend, cfg.RingBufferSize = Backend(b.Name), 1<<20
				s, err := open(t.Context(), cat, cfg, backend.LiveProbe)
				if err != nil {
					t.Fatal(err)
				}
				defer s.close()
				for prog, p := range s.capture.Collection.Programs {
					info, err := p.Info()
					if err != nil {
						t.Fatal(err)
					}
					n, ok := info.VerifiedInstructions()
					if !ok {
						t.Skip("the kernel does not report verified instructions (5.16)")
					}
					t.Logf("%s: %d instructions verified", prog, n)
					if n > maxVerified {
						t.Errorf("%s: the verifier processed %d instructions, want at most %d", prog, n, maxVerified)
					}
				}
			})
		}
	}
}
