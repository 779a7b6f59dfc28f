// SPDX-License-Identifier: Apache-2.0

package decode_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/decode/decodetest"
)

// structOf returns the bytes of a whole struct that argument arg of fn
// points to, with its members set as put says, and a pointer to it.
func structOf(t *testing.T, spec *btf.Spec, fn, arg string, put func(buf []byte, typ btf.Type) error) ([]byte, btf.Type) {
	t.Helper()
	p := proto(t, spec, fn)
	typ, err := decodetest.Pointee(p, arg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := btf.Sizeof(typ)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	if err := put(buf, typ); err != nil {
		t.Fatal(err)
	}
	return buf, &btf.Pointer{Target: typ}
}

// TestShortViews decodes the kernel's everyday structs as people read
// them: a task as comm[pid], an inode as its number and mode, a network
// device and a dentry by name; --full and a deeper --depth show the
// members instead.
func TestShortViews(t *testing.T) {
	spec := fixture(t)
	task, taskType := structOf(t, spec, "wake_up_process", "p", func(b []byte, typ btf.Type) error {
		if err := decodetest.PutBytes(b, typ, "comm", []byte("trawl\x00")); err != nil {
			return err
		}
		if err := decodetest.Put(b, typ, "prio", 120); err != nil {
			return err
		}
		return decodetest.Put(b, typ, "pid", 42)
	})
	inode, inodeType := structOf(t, spec, "inode_permission", "inode", func(b []byte, typ btf.Type) error {
		if err := decodetest.Put(b, typ, "i_mode", 0o100644); err != nil {
			return err
		}
		return decodetest.Put(b, typ, "i_ino", 1234)
	})
	dev, devType := structOf(t, spec, "netif_carrier_on", "dev", func(b []byte, typ btf.Type) error {
		if err := decodetest.PutBytes(b, typ, "name", []byte("lo\x00")); err != nil {
			return err
		}
		return decodetest.Put(b, typ, "ifindex", 1)
	})
	dentry, dentryType := structOf(t, spec, "dput", "dentry", func(b []byte, typ btf.Type) error {
		return decodetest.Put(b, typ, "d_name.name", 0xffff888004b2c000)
	})
	d := decode.NewDecoder(decode.Options{}, nil)
	// The dentry's name, captured behind its d_name.name.
	name, _, err := decodetest.Locate(dentryType.(*btf.Pointer).Target, "d_name.name")
	if err != nil {
		t.Fatal(err)
	}
	d.Pointees(map[*byte]decode.Pointee{&dentry[name]: {Data: []byte("version\x00"), String: true}})
	for _, tc := range []struct {
		typ           btf.Type
		data          []byte
		short, fields string
	}{
		{taskType, task, "trawl[42]", "comm=trawl pid=42"},
		{inodeType, inode, "", "ino=1234 mode=S_IFREG|0644"},
		{devType, dev, "lo", "name=lo ifindex=1"},
		{dentryType, dentry, "version", "name=version"},
	} {
		v := d.Arg("x", tc.typ, decode.Raw{Slots: [2]uint64{0xffff888000001000}, Data: tc.data})
		if v.Kind != call.KindStruct || v.Str != tc.short || fieldsOf(v) != tc.fields {
			t.Errorf("%s: %q {%s}, want %q {%s}", tc.typ, v.Str, fieldsOf(v), tc.short, tc.fields)
		}
	}
	// A task whose view's members were not captured shows what was.
	if v := d.Arg("p", taskType, decode.Raw{Slots: [2]uint64{0xffff888000001000}, Data: task[:256]}); v.Str != "" || !strings.Contains(fieldsOf(v), "prio=120") {
		t.Errorf("first bytes of a task: %q {%s}, want its members", v.Str, fieldsOf(v))
	}
	// Or those its windows hold, past them.
	pid, _, err := decodetest.Locate(taskType.(*btf.Pointer).Target, "pid")
	if err != nil {
		t.Fatal(err)
	}
	comm, _, err := decodetest.Locate(taskType.(*btf.Pointer).Target, "comm")
	if err != nil {
		t.Fatal(err)
	}
	windows := []decode.Window{{Off: comm, Data: task[comm : comm+16]}, {Off: pid, Data: task[pid : pid+4]}}
	if v := d.Arg("p", taskType, decode.Raw{Slots: [2]uint64{0xffff888000001000}, Data: task[:256], Windows: windows}); v.Str != "trawl[42]" {
		t.Errorf("a task's first bytes and windows: %q {%s}, want trawl[42]", v.Str, fieldsOf(v))
	}
	for _, opts := range []decode.Options{{Full: true}, {Depth: decode.DefaultDepth + 1}} {
		v := decode.NewDecoder(opts, nil).Arg("p", taskType, decode.Raw{Slots: [2]uint64{0xffff888000001000}, Data: task})
		if v.Str != "" || len(v.Fields) <= 2 {
			t.Errorf("%+v: %q with %d members, want the members", opts, v.Str, len(v.Fields))
		}
	}
}

// fieldsOf shows the names and values of v's members, scalars and
// strings only.
func fieldsOf(v call.Value) string {
	var s string
	for _, f := range v.Fields {
		if s != "" {
			s += " "
		}
		s += f.Name + "="
		switch f.Kind {
		case call.KindString, call.KindEnum:
			s += f.Str
		case call.KindInt:
			s += strconv.FormatInt(f.Int(), 10)
		case call.KindUint:
			s += strconv.FormatUint(f.Uint(), 10)
		default:
			s += f.Kind.String()
		}
	}
	return s
}
