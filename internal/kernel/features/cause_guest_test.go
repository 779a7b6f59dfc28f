// SPDX-License-Identifier: Apache-2.0

package features

import (
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestFprobeInBTF checks the BTF evidence against the probe: a kernel has
// register_fprobe_ips exactly when it has kprobe.multi links.
func TestFprobeInBTF(t *testing.T) {
	guest.Require(t)
	err := KprobeMulti()
	f := liveFacts()
	t.Logf("%s %s, config %q: kprobe.multi: %v", f.arch, f.release, f.configPath, err)
	if (err == nil) != (f.fprobeBTF == yes) {
		t.Errorf("kprobe.multi probe says %v, but %s in kernel BTF is %v (1 yes, 2 no)", err, fprobeFunc, f.fprobeBTF)
	}
}
