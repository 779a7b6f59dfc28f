// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateTracepoints takes tracepoints with --entry, --track and
// --stack, and refuses a tracepoint as an entry pattern.
func TestValidateTracepoints(t *testing.T) {
	ok := Config{Patterns: []string{"tp:skb:kfree_skb", "udp_*"}, Entries: []string{"__x64_sys_sendto"}, Track: "skb", Stack: true}
	if err := ok.Validate(); err != nil {
		t.Errorf("tracepoints with --entry, --track and --stack: %v", err)
	}
	for _, entry := range []string{"tp:sched:*", "!tp:skb:kfree_skb"} {
		bad := Config{Patterns: []string{"vfs_read"}, Entries: []string{"do_sys_openat2", entry}}
		err := bad.Validate()
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--entry \""+entry+"\"") {
			t.Errorf("--entry %s: %v, want ErrBadConfig naming it", entry, err)
		}
	}
}
