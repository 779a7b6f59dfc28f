// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestLiveAgreesWithTracefs checks, in a guest, that the catalogue's
// traceable set is the kernel's own available_filter_functions: every
// function listed there is in the catalogue and traceable, and nothing
// else is traceable.
func TestLiveAgreesWithTracefs(t *testing.T) {
	guest.Require(t)
	f, err := os.Open("/sys/kernel/tracing/available_filter_functions")
	if err != nil {
		t.Fatalf("read the kernel's traceable functions: %v", err)
	}
	defer f.Close()
	want := map[string]bool{} // "module:name"
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "__ftrace_invalid_address__") {
			continue
		}
		module := ""
		if len(fields) > 1 {
			module = strings.Trim(fields[1], "[]")
		}
		want[module+":"+fields[0]] = true
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	c, release, err := Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if c.Notice() != "" {
		t.Errorf("notice in a guest where tracefs is readable: %s", c.Notice())
	}
	got := map[string]bool{}
	for _, fn := range c.Functions() {
		if fn.Traceable {
			got[fn.Module+":"+fn.Name] = true
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("%s is in available_filter_functions but not traceable in the catalogue", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("%s is traceable in the catalogue but not in available_filter_functions", k)
		}
	}
	t.Logf("%s: %d traceable functions (source %s)", guest.Kernel(), len(got), c.Source())
}
