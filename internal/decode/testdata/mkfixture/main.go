// SPDX-License-Identifier: Apache-2.0

// Command mkfixture writes the small BTF fixture used by the decode and
// render tests: a handful of real kernel functions with the types needed to
// decode their arguments, cut out of a full vmlinux BTF.
//
// Regenerate from the repository root with:
//
//	go run ./internal/decode/testdata/mkfixture -o internal/decode/testdata/kernel.btf
//
// The closure kept for each function is its prototype, every type an
// argument or the return value holds by value and, one pointer deep, every
// type an argument points to. Pointers found below that level keep their
// target's name but point at a forward declaration (for structs and unions),
// so the file stays small while every value the decoder can see keeps its
// real kernel layout.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cilium/ebpf/btf"
)

// funcs are the functions kept in the fixture; each exercises a decoder path.
var funcs = []string{
	"tcp_sendmsg",          // struct pointer, struct with nested anonymous unions
	"vfs_read",             // struct file, user pointer, ssize_t return
	"do_sys_openat2",       // struct open_how, const char __user *
	"do_filp_open",         // pointer return (ERR_PTR)
	"sk_skb_reason_drop",   // struct sk_buff, enum argument
	"__x64_sys_close",      // long return, errno
	"try_to_unmap",         // flag-style enum
	"__audit_tk_injoffset", // 16-byte struct by value
	"tcp_set_state",        // int state
	"wake_up_process",      // struct task_struct: comm[pid]
	"dput",                 // struct dentry: its name
	"inode_permission",     // struct inode: number and mode
	"netif_carrier_on",     // struct net_device: its name
}

func main() {
	src := flag.String("src", "/sys/kernel/btf/vmlinux", "source vmlinux BTF")
	out := flag.String("o", "kernel.btf", "output file")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkfixture:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	spec, err := btf.LoadSpec(src)
	if err != nil {
		return fmt.Errorf("load %s: %w", src, err)
	}
	c := cutter{full: map[btf.Type]btf.Type{}, stub: map[btf.Type]btf.Type{}}
	b, err := btf.NewBuilder(nil, &btf.BuilderOptions{Deduplicate: true})
	if err != nil {
		return err
	}
	for _, name := range funcs {
		var fn *btf.Func
		if err := spec.TypeByName(name, &fn); err != nil {
			return fmt.Errorf("function %s: %w", name, err)
		}
		if _, err := b.Add(c.fn(fn)); err != nil {
			return fmt.Errorf("add %s: %w", name, err)
		}
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		return fmt.Errorf("marshal: %w", err)
	}
	return os.WriteFile(out, raw, 0o644)
}

// cutter copies types, keeping full layouts where the decoder needs them and
// forward declarations elsewhere. Both maps memoise copies so that shared and
// recursive types stay shared.
type cutter struct {
	full map[btf.Type]btf.Type
	stub map[btf.Type]btf.Type
}

func (c *cutter) fn(fn *btf.Func) *btf.Func {
	proto := fn.Type.(*btf.FuncProto)
	np := &btf.FuncProto{Return: c.arg(proto.Return)}
	for _, p := range proto.Params {
		np.Params = append(np.Params, btf.FuncParam{Name: p.Name, Type: c.arg(p.Type)})
	}
	return &btf.Func{Name: fn.Name, Type: np, Linkage: fn.Linkage}
}

// arg copies an argument type: held by value, and a pointer's target too.
func (c *cutter) arg(t btf.Type) btf.Type {
	switch v := t.(type) {
	case *btf.Pointer:
		return &btf.Pointer{Target: c.copy(v.Target)}
	case *btf.Typedef:
		return &btf.Typedef{Name: v.Name, Type: c.arg(v.Type)}
	case *btf.Const:
		return &btf.Const{Type: c.arg(v.Type)}
	case *btf.Volatile:
		return &btf.Volatile{Type: c.arg(v.Type)}
	case *btf.Restrict:
		return &btf.Restrict{Type: c.arg(v.Type)}
	case *btf.TypeTag:
		return &btf.TypeTag{Value: v.Value, Type: c.arg(v.Type)}
	}
	return c.copy(t)
}

// copy copies t with its full layout; pointers inside it are cut.
func (c *cutter) copy(t btf.Type) btf.Type {
	if n, ok := c.full[t]; ok {
		return n
	}
	var n btf.Type
	switch v := t.(type) {
	case *btf.Struct:
		s := &btf.Struct{Name: v.Name, Size: v.Size}
		c.full[t] = s
		s.Members = c.members(v.Members, c.copy)
		return s
	case *btf.Union:
		u := &btf.Union{Name: v.Name, Size: v.Size}
		c.full[t] = u
		u.Members = c.members(v.Members, c.copy)
		return u
	case *btf.Array:
		n = &btf.Array{Index: c.copy(v.Index), Type: c.copy(v.Type), Nelems: v.Nelems}
	case *btf.Typedef:
		n = &btf.Typedef{Name: v.Name, Type: c.copy(v.Type)}
	case *btf.Const:
		n = &btf.Const{Type: c.copy(v.Type)}
	case *btf.Volatile:
		n = &btf.Volatile{Type: c.copy(v.Type)}
	case *btf.Restrict:
		n = &btf.Restrict{Type: c.copy(v.Type)}
	case *btf.TypeTag:
		n = &btf.TypeTag{Value: v.Value, Type: c.copy(v.Type)}
	case *btf.Pointer:
		n = &btf.Pointer{Target: c.cut(v.Target)}
	default:
		n = c.cut(t)
	}
	c.full[t] = n
	return n
}

// cut copies t as seen through a pointer that is not followed: structs and
// unions become forward declarations.
func (c *cutter) cut(t btf.Type) btf.Type {
	if n, ok := c.stub[t]; ok {
		return n
	}
	var n btf.Type
	switch v := t.(type) {
	case *btf.Struct:
		n = &btf.Fwd{Name: v.Name, Kind: btf.FwdStruct}
	case *btf.Union:
		n = &btf.Fwd{Name: v.Name, Kind: btf.FwdUnion}
	case *btf.Int:
		n = &btf.Int{Name: v.Name, Size: v.Size, Encoding: v.Encoding}
	case *btf.Float:
		n = &btf.Float{Name: v.Name, Size: v.Size}
	case *btf.Enum:
		n = &btf.Enum{Name: v.Name, Size: v.Size, Signed: v.Signed, Values: v.Values}
	case *btf.Fwd:
		n = &btf.Fwd{Name: v.Name, Kind: v.Kind}
	case *btf.Void:
		n = v
	case *btf.Array:
		n = &btf.Array{Index: c.cut(v.Index), Type: c.cut(v.Type), Nelems: v.Nelems}
	case *btf.Typedef:
		n = &btf.Typedef{Name: v.Name, Type: c.cut(v.Type)}
	case *btf.Const:
		n = &btf.Const{Type: c.cut(v.Type)}
	case *btf.Volatile:
		n = &btf.Volatile{Type: c.cut(v.Type)}
	case *btf.Restrict:
		n = &btf.Restrict{Type: c.cut(v.Type)}
	case *btf.TypeTag:
		n = &btf.TypeTag{Value: v.Value, Type: c.cut(v.Type)}
	case *btf.Pointer:
		p := &btf.Pointer{}
		c.stub[t] = p
		p.Target = c.cut(v.Target)
		return p
	case *btf.FuncProto:
		fp := &btf.FuncProto{}
		c.stub[t] = fp
		fp.Return = c.cut(v.Return)
		for _, p := range v.Params {
			fp.Params = append(fp.Params, btf.FuncParam{Name: p.Name, Type: c.cut(p.Type)})
		}
		return fp
	default:
		panic(fmt.Sprintf("unexpected type %T", t))
	}
	c.stub[t] = n
	return n
}

func (c *cutter) members(ms []btf.Member, copyType func(btf.Type) btf.Type) []btf.Member {
	out := make([]btf.Member, len(ms))
	for i, m := range ms {
		out[i] = btf.Member{Name: m.Name, Type: copyType(m.Type), Offset: m.Offset, BitfieldSize: m.BitfieldSize}
	}
	return out
}
