// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"fmt"
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

// TestClonePlans plans made-up compiler clones of functions of the amd64
// fixture's BTF (tcp_sendmsg returns int, vfs_read ssize_t): raw argument
// registers, and the base function's return type where the clone keeps it.
func TestClonePlans(t *testing.T) {
	clones := map[string]string{
		"tcp_sendmsg.part.0.constprop.0": "ffffffff83000000",
		"tcp_sendmsg.isra.0":             "ffffffff83000100",
		"vfs_read.cold":                  "ffffffff83000200",
	}
	fsys := fstest.MapFS{}
	root := "../kernel/testdata/amd64"
	for _, file := range []string{"sys/kernel/btf/vmlinux", "proc/kallsyms", "sys/kernel/tracing/available_filter_functions_addrs"} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for name, addr := range clones {
			switch filepath.Base(file) {
			case "kallsyms":
				data = fmt.Appendf(data, "%s t %s\n", addr, name)
			case "available_filter_functions_addrs":
				data = fmt.Appendf(data, "%s %s\n", addr, name)
			}
		}
		fsys[file] = &fstest.MapFile{Data: data}
	}
	c, err := kernel.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ret string
		size      int
		guessed   bool
	}{
		{"tcp_sendmsg.part.0.constprop.0", "int", 4, false},
		{"vfs_read.cold", "ssize_t", 8, false},
		{"tcp_sendmsg.isra.0", "long", 4, true},
	} {
		fns := c.Lookup(tc.name)
		if len(fns) != 1 {
			t.Fatalf("%s: %d entries", tc.name, len(fns))
		}
		p := mustPlan(t, fns[0])
		if p.Proto != nil || p.Args != nil {
			t.Errorf("%s: prototype %v, args %v; want raw registers", tc.name, p.Proto, p.Args)
		}
		if got := kernel.TypeString(p.Ret.Type); got != tc.ret || p.Ret.Class != Signed || p.Ret.Size != tc.size || p.Ret.Guessed != tc.guessed {
			t.Errorf("%s: returns %s %+v, want %s of %d bytes, guessed %v", tc.name, got, p.Ret, tc.ret, tc.size, tc.guessed)
		}
		if err := p.Attachable(Trampoline, AMD64, KernelVersion{6, 12}); !errors.Is(err, ErrNoPrototype) {
			t.Errorf("%s on a trampoline: %v, want ErrNoPrototype", tc.name, err)
		}
		if err := p.Attachable(Kprobe, AMD64, KernelVersion{6, 12}); err != nil {
			t.Errorf("%s on a kprobe: %v", tc.name, err)
		}
	}
}
