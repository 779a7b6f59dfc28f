// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestWithBTF checks that a catalogue of a root without sys/kernel/btf
// reads the kernel's BTF from a file, raw or in an ELF file's .BTF
// section, as it reads it from sys/kernel/btf/vmlinux.
func TestWithBTF(t *testing.T) {
	root := fixture(t, nil, "vmlinux")
	if _, err := Load(root); !errors.Is(err, ErrNoBTF) {
		t.Fatalf("a root without BTF: %v, want ErrNoBTF", err)
	}
	loaders := map[string]func(fs.FS) (*Catalogue, error){
		"Load":      Load,
		"LoadNames": func(fsys fs.FS) (*Catalogue, error) { return LoadNames(fsys, []string{"vfs_read"}) },
	}
	for _, file := range []string{"testdata/amd64/sys/kernel/btf/vmlinux", "testdata/vmlinux.elf"} {
		for name, load := range loaders {
			t.Run(filepath.Base(file)+"/"+name, func(t *testing.T) {
				own, err := load(fixture(t, nil))
				if err != nil {
					t.Fatal(err)
				}
				c, err := load(WithBTF(root, ExternalBTF{File: file}))
				if err != nil {
					t.Fatal(err)
				}
				if a, b := len(c.Functions()), len(own.Functions()); a != b {
					t.Errorf("%d functions, %d with the kernel's BTF", a, b)
				}
				got, want := only(t, c, "vfs_read").Proto(), only(t, own, "vfs_read").Proto()
				if got == nil || want == nil {
					t.Fatalf("vfs_read's prototype: %v, want %v", got, want)
				}
				gotParams, wantParams := got.Type.(*btf.FuncProto).Params, want.Type.(*btf.FuncProto).Params
				if len(gotParams) != len(wantParams) || gotParams[0].Name != wantParams[0].Name {
					t.Errorf("vfs_read's arguments: %v, want %v", gotParams, wantParams)
				}
			})
		}
	}
}

// TestWithBTFModules checks that the modules' BTF comes from the
// directory given, and from nowhere without one.
func TestWithBTFModules(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nf_conntrack"), []byte("module"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := WithBTF(fixture(t, nil), ExternalBTF{File: "testdata/vmlinux.elf", Dir: dir})
	if data, err := fs.ReadFile(root, "sys/kernel/btf/nf_conntrack"); err != nil || string(data) != "module" {
		t.Errorf("module BTF: %q, %v", data, err)
	}
	if data, err := fs.ReadFile(root, "proc/kallsyms"); err != nil || len(data) == 0 {
		t.Errorf("kallsyms through the root: %v", err)
	}
	root = WithBTF(fixture(t, nil), ExternalBTF{File: "testdata/vmlinux.elf"})
	if _, err := fs.ReadFile(root, "sys/kernel/btf/nf_conntrack"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("module BTF without a directory: %v, want ErrNotExist", err)
	}
}

// TestCheckBTF checks what is wrong with bad external BTF is told.
func TestCheckBTF(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("not BTF at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable() // a Go binary: an ELF file without .BTF
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken")
	raw, err := os.ReadFile("testdata/amd64/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(broken, raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ext  ExternalBTF
		want string
	}{
		{ExternalBTF{File: filepath.Join(dir, "missing")}, "no such file"},
		{ExternalBTF{File: text}, "neither raw BTF nor an ELF file"},
		{ExternalBTF{File: exe}, "an ELF file without a .BTF section"},
		{ExternalBTF{File: broken}, "parse BTF"},
		{ExternalBTF{File: "testdata/vmlinux.elf", Dir: text}, "is not a directory"},
		{ExternalBTF{File: "testdata/vmlinux.elf", Dir: filepath.Join(dir, "missing")}, "module BTF directory"},
	} {
		if err := CheckBTF(tc.ext); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %q", tc.ext, err, tc.want)
		}
	}
}
