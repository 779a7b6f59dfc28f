// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

func TestSuffixes(t *testing.T) {
	for _, tc := range []struct {
		name, base, suffix string
		keepsABI, keepsRet bool
	}{
		{"vfs_read", "vfs_read", "", false, false},
		{"tcp_v4_send_reset.llvm.4077523316537185513", "tcp_v4_send_reset", ".llvm.4077523316537185513", true, false},
		{"link_path_walk.part.0.constprop.0", "link_path_walk", ".part.0.constprop.0", false, true},
		{"NF_HOOK.constprop.0", "NF_HOOK", ".constprop.0", false, true},
		{"do_open.part.0", "do_open", ".part.0", false, true},
		{"calibrate_delay.cold", "calibrate_delay", ".cold", false, true},
		{"foo.cold.12", "foo", ".cold.12", false, true},
		{"foo.part.0.llvm.123", "foo", ".part.0.llvm.123", false, true},
		{"tcp_v4_rcv.isra.0", "tcp_v4_rcv", ".isra.0", false, false},
		{"foo.isra.0.cold", "foo", ".isra.0.cold", false, false},
		{"foo.constprop.0.isra.0", "foo", ".constprop.0.isra.0", false, false},
		{"foo.lto_priv.0", "foo", ".lto_priv.0", false, false},
		{"foo.llvm.123.part.0", "foo", ".llvm.123.part.0", false, true},
		{"foo.llvm.", "foo", ".llvm.", true, false},
	} {
		base, suffix := splitSuffix(tc.name)
		if base != tc.base || suffix != tc.suffix {
			t.Errorf("splitSuffix(%q) = %q, %q; want %q, %q", tc.name, base, suffix, tc.base, tc.suffix)
		}
		if got := suffixKeepsABI(suffix); got != tc.keepsABI {
			t.Errorf("suffixKeepsABI(%q) = %v, want %v", suffix, got, tc.keepsABI)
		}
		if got := suffixKeepsReturn(suffix); got != tc.keepsRet {
			t.Errorf("suffixKeepsReturn(%q) = %v, want %v", suffix, got, tc.keepsRet)
		}
	}
}

// cloneLines are made-up compiler clones of functions the amd64 fixture's
// BTF has: tcp_sendmsg returns int, vfs_read ssize_t.
var cloneLines = []struct {
	addr, name string
}{
	{"ffffffff83000000", "tcp_sendmsg.part.0.constprop.0"},
	{"ffffffff83000100", "tcp_sendmsg.isra.0"},
	{"ffffffff83000200", "vfs_read.cold"},
	{"ffffffff83000300", "no_such_function.constprop.0"},
}

// withClones is the amd64 fixture with cloneLines added to kallsyms and
// the traceable set.
func withClones(t testing.TB) *Catalogue {
	t.Helper()
	return load(t, fixture(t, func(name string, data []byte) []byte {
		var add bytes.Buffer
		for _, l := range cloneLines {
			switch {
			case strings.HasSuffix(name, "/kallsyms"):
				add.WriteString(l.addr + " t " + l.name + "\n")
			case strings.HasSuffix(name, "/"+filterAddrs):
				add.WriteString(l.addr + " " + l.name + "\n")
			case strings.HasSuffix(name, "/"+filterNames):
				add.WriteString(l.name + "\n")
			}
		}
		return append(data, add.Bytes()...)
	}))
}

// TestCloneReturn checks what a compiler clone takes of its base
// function's prototype: the return type for .part, .constprop and .cold,
// nothing for .isra, and never the arguments.
func TestCloneReturn(t *testing.T) {
	c := withClones(t)
	for _, tc := range []struct {
		name, ret string // ret "" when the clone keeps none
		note      string
	}{
		{"tcp_sendmsg.part.0.constprop.0", "int", "returns what tcp_sendmsg returns"},
		{"vfs_read.cold", "ssize_t", "returns what vfs_read returns"},
		{"tcp_sendmsg.isra.0", "", "return value may have been removed"},
		{"no_such_function.constprop.0", "", "compiler clone of no_such_function"},
	} {
		f := only(t, c, tc.name)
		if !f.Traceable || f.HasProto() || f.Proto() != nil {
			t.Errorf("%s: traceable %v, prototype %v; want traceable without one", tc.name, f.Traceable, f.Proto())
		}
		ret, ok := f.Return()
		if got := ""; ok {
			got = TypeString(ret)
			if got != tc.ret {
				t.Errorf("%s: returns %s, want %q", tc.name, got, tc.ret)
			}
		} else if tc.ret != "" {
			t.Errorf("%s: return type unknown, want %s", tc.name, tc.ret)
		}
		if !strings.Contains(f.ProtoNote, tc.note) {
			t.Errorf("%s: note %q, want it to say %q", tc.name, f.ProtoNote, tc.note)
		}
	}
	// The base function keeps its own entry and prototype.
	if f := only(t, c, "tcp_sendmsg"); f.Proto() == nil || f.RetID != 0 {
		t.Errorf("tcp_sendmsg: %+v", f)
	}
	if _, ok := FunctionOf(&btf.Func{Name: "f", Type: &btf.FuncProto{}}).Return(); ok {
		t.Error("a function with a prototype has a clone's return type")
	}
}
