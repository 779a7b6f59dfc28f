// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/decode"
	"github.com/trawl-dev/trawl/internal/plan"
)

// ErrMissing is wrapped by the errors of a function that lacks a name the
// expression uses.
var ErrMissing = errors.New("no such argument or constant")

// Where the record keeps what a filter reads (struct record of capture.h).
var (
	slotsOff = int16(unsafe.Offsetof(bpf.CaptureRecord{}.Slots))
	retOff   = int16(unsafe.Offsetof(bpf.CaptureRecord{}.Ret))
	funcOff  = int16(unsafe.Offsetof(bpf.CaptureRecord{}.Func))
)

// The body's stack: temporaries, an 8-byte read buffer, a string buffer.
const (
	maxTemps  = 8
	readOff   = -8*maxTemps - 8
	maxString = 128                               // longest string literal
	strOff    = readOff - (maxString+2+7)/8*8 - 8 // room for maxString+2 bytes
)

// Registers of a body: the record, kept across helper calls.
const rRec = asm.R6

// Constants resolves names that are neither arguments nor ret.
type Constants map[string]int64

// addressFamilies are the AF_* macros, absent from BTF.
var addressFamilies = Constants{
	"AF_UNSPEC": 0, "AF_UNIX": 1, "AF_LOCAL": 1, "AF_INET": 2, "AF_INET6": 10,
	"AF_NETLINK": 16, "AF_PACKET": 17, "AF_VSOCK": 40, "AF_XDP": 44,
}

// KernelConstants collects the enum constants of a kernel's BTF, the
// address families and the error numbers (EINVAL, as in ret == -EINVAL).
func KernelConstants(spec *btf.Spec) (Constants, error) {
	c := Constants{}
	for name, v := range addressFamilies {
		c[name] = v
	}
	for name, v := range decode.ErrnoNames() {
		c[name] = v
	}
	for t, err := range spec.All() {
		if err != nil {
			return nil, fmt.Errorf("read enum constants from BTF: %w", err)
		}
		if e, ok := t.(*btf.Enum); ok {
			for _, v := range e.Values {
				c[v.Name] = int64(v.Value)
			}
		}
	}
	return c, nil
}

// Compile compiles e for the function of plan p into a filter body: code
// that expects the record in R6 (not NULL) and returns 1 if the call
// passes, else 0. Errors are *Error, wrapping ErrMissing when the function
// lacks a name e uses.
func Compile(e *Expr, p *plan.Plan, consts Constants) (asm.Instructions, error) {
	c := &compiler{e: e, p: p, consts: consts}
	c.fail = c.b.label()
	if err := c.jump(e.Root, false, c.fail); err != nil {
		return nil, err
	}
	c.b.emit(asm.Mov.Imm(asm.R0, 1), asm.Return())
	c.b.place(c.fail)
	c.b.emit(asm.Mov.Imm(asm.R0, 0), asm.Return())
	return c.b.finish()
}

type compiler struct {
	e      *Expr
	p      *plan.Plan
	consts Constants
	b      builder
	temps  int   // temporaries in use
	fail   label // the whole expression is false
}

func (c *compiler) errorf(n *Node, format string, args ...any) error {
	return &Error{Src: c.e.Src, Pos: n.Pos, Msg: fmt.Sprintf(format, args...)}
}

// value is an integer operand: in R0, or a constant.
type value struct {
	signed  bool
	isConst bool
	c       int64
}

// lval is where an operand lives: in the record at R6+off, or in kernel
// memory at R0+off (R0 set by the code emitted so far).
type lval struct {
	t       btf.Type
	rec     bool
	off     int64
	bitOff  uint32 // bitfields only: bits from off
	bitSize uint32
}

// arg finds a parameter by name.
func (c *compiler) arg(name string) *plan.Arg {
	for i := range c.p.Args {
		if c.p.Args[i].Name == name {
			return &c.p.Args[i]
		}
	}
	return nil
}

// isOperand reports whether a leaf names an argument or ret.
func (c *compiler) isOperand(n *Node) bool {
	return n.Op == "" && !n.IsInt && !n.IsStr && (c.arg(n.Name) != nil || n.Name == "ret")
}

func (c *compiler) lvalue(n *Node) (lval, error) {
	switch n.Op {
	case "":
		if n.IsInt || n.IsStr {
			return lval{}, c.errorf(n, "a constant has no members")
		}
		if a := c.arg(n.Name); a != nil {
			return lval{t: a.Type, rec: true, off: int64(slotsOff) + 8*int64(a.Slot)}, nil
		}
		if n.Name == "ret" {
			if c.p.Ret.Class == plan.Void {
				return lval{}, c.errorf(n, "ret of a function returning void")
			}
			return lval{t: c.p.Ret.Type, rec: true, off: int64(retOff)}, nil
		}
		if _, ok := c.consts[n.Name]; ok {
			return lval{}, c.errorf(n, "%s is a constant, not a struct", n.Name)
		}
		return lval{}, &Error{Src: c.e.Src, Pos: n.Pos, Msg: "no argument " + n.Name, Err: ErrMissing}
	case "->":
		x, err := c.lvalue(n.X)
		if err != nil {
			return lval{}, err
		}
		ptr, ok := btf.UnderlyingType(x.t).(*btf.Pointer)
		if !ok {
			return lval{}, c.errorf(n, "-> on %s, which is not a pointer", typeName(x.t))
		}
		if _, err := c.load(n, x); err != nil {
			return lval{}, err
		}
		return c.member(n, lval{t: ptr.Target}, n.Name)
	case ".":
		x, err := c.lvalue(n.X)
		if err != nil {
			return lval{}, err
		}
		return c.member(n, x, n.Name)
	}
	return lval{}, c.errorf(n, "%s has no members", n.Op)
}

// member returns the member name of the struct or union at x.
func (c *compiler) member(n *Node, x lval, name string) (lval, error) {
	var bits uint32
	t := x.t
	for {
		var members []btf.Member
		switch s := btf.UnderlyingType(t).(type) {
		case *btf.Struct:
			members = s.Members
		case *btf.Union:
			members = s.Members
		default:
			return lval{}, c.errorf(n, "%s%s on %s, which is not a struct or union", n.Op, name, typeName(t))
		}
		m, off, ok := findMember(members, name)
		if !ok {
			return lval{}, c.errorf(n, "%s has no member %s", typeName(t), name)
		}
		bits += off
		if m.BitfieldSize > 0 {
			if x.rec {
				return lval{}, c.errorf(n, "bitfield %s of an argument passed by value", name)
			}
			return lval{t: m.Type, off: x.off + int64(bits/8), bitOff: bits % 8, bitSize: uint32(m.BitfieldSize)}, nil
		}
		if bits%8 != 0 {
			return lval{}, c.errorf(n, "member %s is not byte aligned", name)
		}
		return lval{t: m.Type, rec: x.rec, off: x.off + int64(bits/8)}, nil
	}
}

// findMember finds a member by name, also inside anonymous structs and
// unions, and its bit offset.
func findMember(members []btf.Member, name string) (btf.Member, uint32, bool) {
	for _, m := range members {
		if m.Name == name {
			return m, uint32(m.Offset), true
		}
		if m.Name != "" {
			continue
		}
		var inner []btf.Member
		switch s := btf.UnderlyingType(m.Type).(type) {
		case *btf.Struct:
			inner = s.Members
		case *btf.Union:
			inner = s.Members
		}
		if im, off, ok := findMember(inner, name); ok {
			return im, uint32(m.Offset) + off, true
		}
	}
	return btf.Member{}, 0, false
}

// scalar returns the size and signedness of an integer-like type.
func scalar(t btf.Type) (size int, signed bool, ok bool) {
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		return int(u.Size), u.Encoding&btf.Signed != 0, true
	case *btf.Enum:
		return int(u.Size), u.Signed, true
	case *btf.Pointer:
		return 8, false, true
	}
	return 0, false, false
}

func typeName(t btf.Type) string {
	switch u := t.(type) {
	case *btf.Pointer:
		return typeName(u.Target) + " *"
	case *btf.Const:
		return typeName(u.Type)
	case *btf.Volatile:
		return typeName(u.Type)
	case *btf.Struct:
		return "struct " + u.Name
	case *btf.Union:
		return "union " + u.Name
	case *btf.Enum:
		return "enum " + u.Name
	case *btf.Array:
		return typeName(u.Type) + " []"
	case nil:
		return "void"
	}
	if name := t.TypeName(); name != "" {
		return name
	}
	return fmt.Sprint(t)
}

var sizes = map[int]asm.Size{1: asm.Byte, 2: asm.Half, 4: asm.Word, 8: asm.DWord}

// load emits code that puts the integer at x in R0, extended to 64 bits.
func (c *compiler) load(n *Node, x lval) (value, error) {
	size, signed, ok := scalar(x.t)
	if _, known := sizes[size]; !ok || !known {
		return value{}, c.errorf(n, "cannot compare %s: name one of its members", typeName(x.t))
	}
	if x.rec {
		c.b.emit(asm.LoadMem(asm.R0, rRec, int16(x.off), sizes[size]))
		c.extend(size*8, signed)
		return value{signed: signed}, nil
	}
	if x.off > math.MaxInt32 {
		return value{}, c.errorf(n, "member offset too large")
	}
	read := size
	if x.bitSize > 0 {
		read = int(x.bitOff+x.bitSize+7) / 8
		if read > 8 {
			return value{}, c.errorf(n, "bitfield wider than 8 bytes")
		}
		c.b.emit(asm.StoreImm(asm.RFP, readOff, 0, asm.Word), asm.StoreImm(asm.RFP, readOff+4, 0, asm.Word))
	}
	c.b.emit(
		asm.Mov.Reg(asm.R3, asm.R0),
		asm.Add.Imm(asm.R3, int32(x.off)),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, readOff),
		asm.Mov.Imm(asm.R2, int32(read)),
		asm.FnProbeReadKernel.Call(),
	)
	c.b.jump(asm.JNE.Imm(asm.R0, 0, ""), c.fail)
	if x.bitSize > 0 {
		c.b.emit(
			asm.LoadMem(asm.R0, asm.RFP, readOff, asm.DWord),
			asm.LSh.Imm(asm.R0, int32(64-x.bitOff-x.bitSize)),
		)
		if signed {
			c.b.emit(asm.ArSh.Imm(asm.R0, int32(64-x.bitSize)))
		} else {
			c.b.emit(asm.RSh.Imm(asm.R0, int32(64-x.bitSize)))
		}
		return value{signed: signed}, nil
	}
	c.b.emit(asm.LoadMem(asm.R0, asm.RFP, readOff, sizes[size]))
	c.extend(size*8, signed)
	return value{signed: signed}, nil
}

// extend sign-extends a signed value of bits in R0 (loads zero-extend).
func (c *compiler) extend(bits int, signed bool) {
	if signed && bits < 64 {
		c.b.emit(asm.LSh.Imm(asm.R0, int32(64-bits)), asm.ArSh.Imm(asm.R0, int32(64-bits)))
	}
}

// value compiles an integer operand.
func (c *compiler) value(n *Node) (value, error) {
	switch n.Op {
	case "":
		switch {
		case n.IsInt:
			return value{isConst: true, c: n.Int}, nil
		case n.IsStr:
			return value{}, c.errorf(n, "a string compares only with a char * (==, != or ~)")
		case c.isOperand(n):
			x, err := c.lvalue(n)
			if err != nil {
				return value{}, err
			}
			return c.load(n, x)
		}
		if v, ok := c.consts[n.Name]; ok {
			return value{isConst: true, c: v}, nil
		}
		return value{}, &Error{Src: c.e.Src, Pos: n.Pos, Msg: "no argument or constant " + n.Name, Err: ErrMissing}
	case "->", ".":
		x, err := c.lvalue(n)
		if err != nil {
			return value{}, err
		}
		return c.load(n, x)
	case "-":
		x, err := c.value(n.X)
		if err != nil || x.isConst {
			x.c = -x.c
			return x, err
		}
		c.b.emit(asm.Neg.Imm(asm.R0, 0))
		return value{signed: true}, nil
	case "&", "|":
		x, y, err := c.operands(n)
		if err != nil {
			return value{}, err
		}
		signed := x.signed && y.signed
		if x.isConst && y.isConst {
			if n.Op == "&" {
				return value{isConst: true, c: x.c & y.c}, nil
			}
			return value{isConst: true, c: x.c | y.c}, nil
		}
		op := asm.And
		if n.Op == "|" {
			op = asm.Or
		}
		c.b.emit(c.withRight(op.Imm(asm.R0, 0), op.Reg(asm.R0, asm.R1), y)...)
		return value{signed: signed}, nil
	}
	// A condition used as a value: 1 or 0.
	f, end := c.b.label(), c.b.label()
	if err := c.jump(n, false, f); err != nil {
		return value{}, err
	}
	c.b.emit(asm.Mov.Imm(asm.R0, 1))
	c.b.jump(asm.Ja.Label(""), end)
	c.b.place(f)
	c.b.emit(asm.Mov.Imm(asm.R0, 0))
	c.b.place(end)
	return value{}, nil
}

// constant returns the value of n if it is a constant, emitting nothing.
func (c *compiler) constant(n *Node) (int64, bool) {
	switch {
	case n.Op == "" && n.IsInt:
		return n.Int, true
	case n.Op == "" && !n.IsStr && !c.isOperand(n):
		v, ok := c.consts[n.Name]
		return v, ok
	case n.Op == "-":
		v, ok := c.constant(n.X)
		return -v, ok
	}
	return 0, false
}

// withRight returns imm with y's constant if it fits 32 bits, else reg
// after loading y into R1. Non-constant y is already in R1.
func (c *compiler) withRight(imm, reg asm.Instruction, y value) []asm.Instruction {
	if !y.isConst {
		return []asm.Instruction{reg}
	}
	if y.c >= math.MinInt32 && y.c <= math.MaxInt32 {
		imm.Constant = y.c
		return []asm.Instruction{imm}
	}
	return []asm.Instruction{asm.LoadImm(asm.R1, y.c, asm.DWord), reg}
}

// operands compiles both operands of n: the left one into R0 (it may be a
// constant only if both are), the right one into R1 or a constant. A
// constant takes the signedness of the other side.
func (c *compiler) operands(n *Node) (value, value, error) {
	x, err := c.value(n.X)
	if err != nil {
		return x, x, err
	}
	if v, ok := c.constant(n.Y); ok && !x.isConst {
		return x, value{signed: x.signed, isConst: true, c: v}, nil
	}
	if !x.isConst {
		if c.temps == maxTemps {
			return x, x, c.errorf(n, "expression too deeply nested")
		}
		c.temps++
		c.b.emit(asm.StoreMem(asm.RFP, int16(-8*c.temps), asm.R0, asm.DWord))
	}
	y, err := c.value(n.Y)
	if err != nil {
		return x, y, err
	}
	switch {
	case x.isConst && y.isConst:
		x.signed, y.signed = true, true // C's int constants
	case x.isConst:
		c.b.emit(asm.Mov.Reg(asm.R1, asm.R0), asm.LoadImm(asm.R0, x.c, asm.DWord))
		x.signed, x.isConst = y.signed, false
	default:
		if !y.isConst {
			c.b.emit(asm.Mov.Reg(asm.R1, asm.R0))
		} else {
			y.signed = x.signed
		}
		c.b.emit(asm.LoadMem(asm.R0, asm.RFP, int16(-8*c.temps), asm.DWord))
		c.temps--
	}
	return x, y, nil
}

// Conditional jumps by operator, unsigned and signed, and their negations.
var (
	jumps       = map[Op][2]asm.JumpOp{"==": {asm.JEq, asm.JEq}, "!=": {asm.JNE, asm.JNE}, "<": {asm.JLT, asm.JSLT}, "<=": {asm.JLE, asm.JSLE}, ">": {asm.JGT, asm.JSGT}, ">=": {asm.JGE, asm.JSGE}}
	negations   = map[Op]Op{"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
	comparisons = func(a, b int64, op Op, signed bool) bool {
		ua, ub := uint64(a), uint64(b)
		switch op {
		case "==":
			return a == b
		case "!=":
			return a != b
		case "<":
			return signed && a < b || !signed && ua < ub
		case "<=":
			return signed && a <= b || !signed && ua <= ub
		case ">":
			return signed && a > b || !signed && ua > ub
		}
		return signed && a >= b || !signed && ua >= ub
	}
)

// jump emits code that goes to `to` if n's truth is when, and else falls
// through.
func (c *compiler) jump(n *Node, when bool, to label) error {
	switch n.Op {
	case "&&", "||":
		// a && b jumps on false if either does; a || b on true.
		if (n.Op == "&&") == !when {
			if err := c.jump(n.X, when, to); err != nil {
				return err
			}
			return c.jump(n.Y, when, to)
		}
		skip := c.b.label()
		if err := c.jump(n.X, !when, skip); err != nil {
			return err
		}
		if err := c.jump(n.Y, when, to); err != nil {
			return err
		}
		c.b.place(skip)
		return nil
	case "!":
		return c.jump(n.X, !when, to)
	case "~":
		return c.strcmp(n, when, to)
	case "==", "!=", "<", "<=", ">", ">=":
		if n.X.IsStr || n.Y.IsStr {
			return c.strcmp(n, when, to)
		}
		x, y, err := c.operands(n)
		if err != nil {
			return err
		}
		op := n.Op
		if !when {
			op = negations[op]
		}
		signed := x.signed && y.signed
		if x.isConst {
			if comparisons(x.c, y.c, op, signed) {
				c.b.jump(asm.Ja.Label(""), to)
			}
			return nil
		}
		j := jumps[op][0]
		if signed {
			j = jumps[op][1]
		}
		insns := c.withRight(j.Imm(asm.R0, 0, ""), j.Reg(asm.R0, asm.R1, ""), y)
		c.b.emit(insns[:len(insns)-1]...)
		c.b.jump(insns[len(insns)-1], to)
		return nil
	}
	v, err := c.value(n)
	if err != nil {
		return err
	}
	if v.isConst {
		if (v.c != 0) == when {
			c.b.jump(asm.Ja.Label(""), to)
		}
		return nil
	}
	if when {
		c.b.jump(asm.JNE.Imm(asm.R0, 0, ""), to)
	} else {
		c.b.jump(asm.JEq.Imm(asm.R0, 0, ""), to)
	}
	return nil
}

// strcmp compiles a string comparison: ==, != or ~ (a glob with one
// trailing *) between a char * or char array and a literal.
func (c *compiler) strcmp(n *Node, when bool, to label) error {
	s, lit := n.X, n.Y
	if s.IsStr {
		s, lit = lit, s
	}
	if !lit.IsStr {
		return c.errorf(n, "%s wants a string on one side", n.Op)
	}
	if s.IsStr {
		return c.errorf(n, "comparing two strings")
	}
	if n.Op != "==" && n.Op != "!=" && n.Op != "~" {
		return c.errorf(n, "strings compare with ==, != or ~, not %s", n.Op)
	}
	want, prefix := lit.Str, false
	if n.Op == "~" {
		for i := 0; i < len(want); i++ {
			if want[i] == '*' && i != len(want)-1 {
				return &Error{Src: c.e.Src, Pos: lit.Pos + 1 + i, Msg: "only a trailing * is supported in a pattern"}
			}
		}
		if len(want) > 0 && want[len(want)-1] == '*' {
			want, prefix = want[:len(want)-1], true
		}
	}
	if len(want) > maxString {
		return c.errorf(lit, "string longer than %d bytes", maxString)
	}
	x, err := c.lvalue(s)
	if err != nil {
		return err
	}
	// Put the string's address in R3, and whether it may be user memory.
	user := false
	switch t := btf.UnderlyingType(x.t).(type) {
	case *btf.Pointer:
		if !isChar(t.Target) {
			return c.errorf(s, "%s is not a string (char *)", typeName(x.t))
		}
		if _, err := c.load(s, x); err != nil {
			return err
		}
		user = true
	case *btf.Array:
		if !isChar(t.Type) || x.rec {
			return c.errorf(s, "%s is not a string (char * or a char array in kernel memory)", typeName(x.t))
		}
		c.b.emit(asm.Add.Imm(asm.R0, int32(x.off)))
	default:
		return c.errorf(s, "%s is not a string (char *)", typeName(x.t))
	}
	if c.temps == maxTemps {
		return c.errorf(n, "expression too deeply nested")
	}
	tmp := int16(-8 * (c.temps + 1))
	c.b.emit(asm.StoreMem(asm.RFP, tmp, asm.R0, asm.DWord))
	size := int32(len(want) + 2) // room to see a longer string
	if prefix {
		size = int32(len(want) + 1)
	}
	read := func(fn asm.BuiltinFunc) {
		c.b.emit(
			asm.Mov.Reg(asm.R1, asm.RFP),
			asm.Add.Imm(asm.R1, strOff),
			asm.Mov.Imm(asm.R2, size),
			asm.LoadMem(asm.R3, asm.RFP, tmp, asm.DWord),
			fn.Call(),
		)
	}
	read(asm.FnProbeReadKernelStr)
	if user {
		// A char * may be a user pointer (a system call's argument).
		done := c.b.label()
		c.b.jump(asm.JSGE.Imm(asm.R0, 0, ""), done)
		read(asm.FnProbeReadUserStr)
		c.b.place(done)
	}
	c.b.jump(asm.JSLT.Imm(asm.R0, 0, ""), c.fail)
	// Equal: want and its NUL were read. Prefix: len(want) bytes were.
	differ, end := c.b.label(), c.b.label()
	c.b.jump(asm.JNE.Imm(asm.R0, int32(len(want)+1), ""), differ)
	for off := 0; off < len(want); {
		n := 8
		for n > len(want)-off {
			n /= 2
		}
		var v uint64
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(want[off+i])
		}
		c.b.emit(
			asm.LoadMem(asm.R1, asm.RFP, int16(strOff+off), sizes[n]),
			asm.LoadImm(asm.R2, int64(v), asm.DWord),
		)
		c.b.jump(asm.JNE.Reg(asm.R1, asm.R2, ""), differ)
		off += n
	}
	match := when == (n.Op != "!=")
	if match {
		c.b.jump(asm.Ja.Label(""), to)
	} else {
		c.b.jump(asm.Ja.Label(""), end)
	}
	c.b.place(differ)
	if !match {
		c.b.jump(asm.Ja.Label(""), to)
	}
	c.b.place(end)
	return nil
}

func isChar(t btf.Type) bool {
	i, ok := btf.UnderlyingType(t).(*btf.Int)
	return ok && i.Name == "char"
}
