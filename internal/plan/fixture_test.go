// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// TestArm64Fixture plans functions of a real arm64 kernel's BTF.
func TestArm64Fixture(t *testing.T) {
	c, err := kernel.Load(os.DirFS("../kernel/testdata/arm64"))
	if err != nil {
		t.Fatal(err)
	}
	plan := func(name string) *Plan {
		fns := c.Lookup(name)
		if len(fns) != 1 {
			t.Fatalf("%s: %d entries", name, len(fns))
		}
		return mustPlan(t, fns[0])
	}

	p := plan("ZSTD_CCtx_setCParams")
	if got := p.Args[1].Kprobe[ARM64]; got != indirect(reg(1)) {
		t.Errorf("28-byte struct on arm64 at %s, want by reference in x1", got)
	}
	if got := p.Args[1].Kprobe[AMD64]; got != stack(8) {
		t.Errorf("28-byte struct on x86-64 at %s, want the stack", got)
	}

	p = plan("migrate_pages_batch")
	if err := p.Attachable(Trampoline, ARM64, KernelVersion{6, 12}); !errors.Is(err, ErrTooManyArgs) {
		t.Errorf("10 slots on arm64 6.12: %v", err)
	}
	if err := p.Attachable(Trampoline, ARM64, KernelVersion{7, 3}); err != nil {
		t.Errorf("10 slots on arm64 7.3: %v", err)
	}
	if got := p.Args[8].Kprobe[ARM64]; got != stack(0) {
		t.Errorf("9th argument on arm64 at %s, want sp+0", got)
	}

	if err := plan("ip_finish_output2").Attachable(Trampoline, ARM64, KernelVersion{7, 3}); !errors.Is(err, ErrSeveralAddresses) {
		t.Errorf("duplicate name: %v", err)
	}
	if err := plan("tcp_v4_rcv").Attachable(Kprobe, ARM64, KernelVersion{7, 3}); !errors.Is(err, ErrNotTraceable) {
		t.Errorf("notrace function: %v", err)
	}
}

// TestCachedKernels plans every BTF function of the Debian kernels the test
// bed downloads (.cache/btf at the top of the module), when present.
func TestCachedKernels(t *testing.T) {
	files, _ := filepath.Glob("../../.cache/btf/*.btf")
	if len(files) == 0 {
		t.Skip("no kernel BTF in .cache/btf")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			c, err := kernel.Load(fstest.MapFS{
				"sys/kernel/btf/vmlinux": {Data: data},
				"proc/kallsyms":          {Data: nil},
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(planAll(t, c)); n < 10000 {
				t.Errorf("only %d functions", n)
			}
		})
	}
}
