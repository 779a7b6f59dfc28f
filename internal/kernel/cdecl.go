// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// TypeString formats t as C, e.g. "struct sock *", "const char *", "size_t".
func TypeString(t btf.Type) string {
	return declare(t, "")
}

// Declaration formats a C declaration of name with type t, e.g.
// "struct sock *sk" or "void (*fn)(int)".
func Declaration(t btf.Type, name string) string {
	return declare(t, name)
}

// Prototype formats a function as a C prototype, e.g.
// "int tcp_sendmsg(struct sock *sk, struct msghdr *msg, size_t size)".
func Prototype(fn *btf.Func) string {
	return declare(fn.Type, fn.Name)
}

// IsVariadic reports whether a function prototype ends in "...".
func IsVariadic(proto *btf.FuncProto) bool {
	n := len(proto.Params)
	if n == 0 {
		return false
	}
	_, void := proto.Params[n-1].Type.(*btf.Void)
	return void && proto.Params[n-1].Name == ""
}

// declare writes the C declarator of inner (a name, possibly already
// wrapped in pointers, arrays or parameter lists) with type t.
func declare(t btf.Type, inner string) string {
	switch t := t.(type) {
	case nil, *btf.Void:
		return "void" + space(inner)
	case *btf.Pointer:
		switch btf.QualifiedType(t.Target).(type) {
		case *btf.FuncProto, *btf.Array:
			return declare(t.Target, "(*"+inner+")")
		}
		return declare(t.Target, "*"+inner)
	case *btf.Const:
		return qualify("const", t.Type, inner)
	case *btf.Volatile:
		return qualify("volatile", t.Type, inner)
	case *btf.Restrict:
		return declare(t.Type, inner)
	case *btf.TypeTag:
		return declare(t.Type, inner)
	case *btf.Array:
		return declare(t.Type, fmt.Sprintf("%s[%d]", inner, t.Nelems))
	case *btf.FuncProto:
		return declare(t.Return, inner+"("+params(t)+")")
	case *btf.Func:
		return declare(t.Type, inner)
	case *btf.Struct:
		return tagged("struct", t.Name) + space(inner)
	case *btf.Union:
		return tagged("union", t.Name) + space(inner)
	case *btf.Enum:
		return tagged("enum", t.Name) + space(inner)
	case *btf.Fwd:
		kind := "struct"
		if t.Kind == btf.FwdUnion {
			kind = "union"
		}
		return tagged(kind, t.Name) + space(inner)
	default:
		return t.TypeName() + space(inner)
	}
}

// qualify writes a const or volatile qualifier: after the star for a
// qualified pointer ("char *const p"), before the type otherwise.
func qualify(qual string, t btf.Type, inner string) string {
	if p, ok := t.(*btf.Pointer); ok {
		return declare(p, qual+" "+inner)
	}
	return qual + " " + declare(t, inner)
}

func params(proto *btf.FuncProto) string {
	if len(proto.Params) == 0 {
		return "void"
	}
	parts := make([]string, len(proto.Params))
	for i, p := range proto.Params {
		if i == len(proto.Params)-1 && IsVariadic(proto) {
			parts[i] = "..."
			continue
		}
		parts[i] = declare(p.Type, p.Name)
	}
	return strings.Join(parts, ", ")
}

func tagged(kind, name string) string {
	if name == "" {
		return kind + " {...}"
	}
	return kind + " " + name
}

func space(inner string) string {
	if inner == "" {
		return ""
	}
	return " " + inner
}

// ParamTypes returns the C types of fn's parameters, "..." excluded.
func ParamTypes(fn *btf.Func) []string {
	proto, ok := fn.Type.(*btf.FuncProto)
	if !ok {
		return nil
	}
	params := proto.Params
	if IsVariadic(proto) {
		params = params[:len(params)-1]
	}
	types := make([]string, len(params))
	for i, p := range params {
		types[i] = TypeString(p.Type)
	}
	return types
}
