// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// ShowStub is the function of the capture program whose body the --show
// expressions replace (trawl_show in internal/bpf/filter.h).
const ShowStub = "trawl_show"

// ShowString is the most bytes of a string a --show expression reads.
const ShowString = 64

// ShowBuf is the most bytes buf(PTR, LEN) reads.
const ShowBuf = 64

// Where the frame keeps its data (struct frame of capture.h: the record,
// then the data).
var (
	dataLenOff = int16(unsafe.Offsetof(bpf.CaptureRecord{}.DataLen))
	dataOff    = int32(unsafe.Sizeof(bpf.CaptureRecord{}))
	maxData    = int32(bpf.CaptureLimitMAX_DATA)
)

// A register of the show body besides R6: where the values go.
const rDst = asm.R7

// Formats of a --show value, written FORMAT(EXPR).
const (
	FormatIP   = "ip"   // an IPv4 address in network order: 10.0.0.1
	FormatIPv6 = "ipv6" // an IPv6 address, 16 bytes in memory (struct in6_addr)
	FormatPort = "port" // a port in network order
	FormatHex  = "hex"  // an integer in hex
	FormatStr  = "str"  // a pointer of any type read as a string
	FormatBuf  = "buf"  // buf(PTR, LEN): LEN bytes at PTR, at most ShowBuf
)

var formats = []string{FormatIP, FormatIPv6, FormatPort, FormatHex, FormatStr}

// ShowExpr is a parsed --show expression: Src as written, the expression
// and its format ("" for the value as its type reads); for buf(PTR, LEN),
// Expr is PTR and Len is LEN.
type ShowExpr struct {
	Src    string
	Expr   *Expr
	Format string
	Len    *Expr
}

// ParseShow parses a --show expression: EXPR, or FORMAT(EXPR) with one of
// the formats.
func ParseShow(src string) (ShowExpr, error) {
	se := ShowExpr{Src: src}
	inner := src
	for _, f := range formats {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(src), f+"("); ok && strings.HasSuffix(rest, ")") {
			se.Format, inner = f, strings.TrimSuffix(rest, ")")
			break
		}
	}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(src), FormatBuf+"("); ok && strings.HasSuffix(rest, ")") {
		return parseBuf(se, strings.TrimSuffix(rest, ")"), strings.Index(src, "(")+1)
	}
	var err error
	se.Expr, err = Parse(inner)
	return se, err
}

// parseBuf parses the PTR, LEN of buf(PTR, LEN), inner, at byte start of
// se.Src: split at the comma outside parentheses, brackets and string
// literals. Both expressions keep se.Src, so that errors show all of it.
func parseBuf(se ShowExpr, inner string, start int) (ShowExpr, error) {
	part := func(s string, at int) (*Expr, error) {
		e, err := Parse(s)
		if err != nil {
			return nil, err
		}
		shift(e.Root, at)
		e.Src = se.Src
		return e, nil
	}
	level, quoted := 0, false
	for i := 0; i < len(inner); i++ {
		switch ch := inner[i]; {
		case quoted && ch == '\\':
			i++
		case ch == '"':
			quoted = !quoted
		case quoted:
		case ch == '(' || ch == '[':
			level++
		case ch == ')' || ch == ']':
			level--
		case ch == ',' && level == 0:
			var err error
			if se.Expr, err = part(inner[:i], start); err != nil {
				return se, err
			}
			se.Format = FormatBuf
			se.Len, err = part(inner[i+1:], start+i+1)
			return se, err
		}
	}
	return se, &Error{Src: se.Src, Msg: "buf() wants a pointer and a length: buf(PTR, LEN)"}
}

// shift moves the positions of n and its operands by at bytes.
func shift(n *Node, at int) {
	if n == nil {
		return
	}
	n.Pos += at
	shift(n.X, at)
	shift(n.Y, at)
}

// Shown is one --show expression as a function's show block holds it:
// Off bytes into the block, a value of Type (8 bytes, extended to 64
// bits), or if String a NUL-terminated string of at most ShowString bytes,
// or with FormatIPv6 16 bytes.
type Shown struct {
	Expr   string
	Format string
	Type   btf.Type
	String bool
	Off    int
}

// size is the bytes the value takes in the block.
func (f *Shown) size() int {
	switch {
	case f.String:
		return ShowString
	case f.Format == FormatIPv6:
		return 16
	case f.Format == FormatBuf:
		return 8 + ShowBuf
	}
	return 8
}

// Block is the layout of the values a function's show body appends to its
// frame's data: an 8-byte mask of the values read (bit i: Fields[i]), then
// the values. Size is its size in bytes.
type Block struct {
	Fields []Shown
	Size   int
}

// CompileShow compiles the --show expressions for the function of plan p
// into a show body: code that expects the frame in R6 (not NULL), and
// appends a Block of their values to its data. Expressions naming what p
// lacks are left out, their errors returned in missing (a *Error each).
// Without any expression left, body is nil.
func CompileShow(exprs []ShowExpr, p *plan.Plan, consts Constants) (body asm.Instructions, block Block, missing []error, err error) {
	block.Size = 8
	c := &compiler{p: p, consts: consts}
	var code builder
	for i, e := range exprs {
		c.e, c.b, c.temps = e.Expr, builder{}, 0
		c.fail = c.b.label()
		f, err := c.show(e, len(block.Fields), block.Size)
		if err != nil {
			missing = append(missing, err)
			continue
		}
		c.b.place(c.fail)
		c.b.emit(asm.Mov.Imm(asm.R0, 0)) // the label needs an instruction
		insns, err := c.b.finish()
		if err != nil {
			return nil, Block{}, nil, fmt.Errorf("--show %s: %w", exprs[i].Src, err)
		}
		code.emit(insns...)
		block.Fields = append(block.Fields, f)
		block.Size += f.size()
	}
	if len(block.Fields) == 0 {
		return nil, Block{}, missing, nil
	}
	var b builder
	end := b.label()
	b.emit(asm.LoadMem(rDst, rRec, dataLenOff, asm.Half))
	b.jump(asm.JGT.Imm(rDst, maxData-int32(block.Size), ""), end)
	b.emit(
		asm.Add.Reg(rDst, rRec),
		asm.Add.Imm(rDst, dataOff),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(rDst, 0, asm.R1, asm.DWord),
	)
	b.emit(code.insns...)
	b.emit(
		asm.LoadMem(asm.R1, rRec, dataLenOff, asm.Half),
		asm.Add.Imm(asm.R1, int32(block.Size)),
		asm.StoreMem(rRec, dataLenOff, asm.R1, asm.Half),
	)
	b.place(end)
	b.emit(asm.Mov.Imm(asm.R0, 0), asm.Return())
	body, err = b.finish()
	return body, block, missing, err
}

// show compiles expression e, the i-th of the block, whose value goes off
// bytes into it; on a failed read it goes to c.fail.
func (c *compiler) show(e ShowExpr, i, off int) (Shown, error) {
	f := Shown{Expr: e.Src, Format: e.Format, Off: off}
	n := e.Expr.Root
	if n.Op == "" && n.IsStr {
		return f, c.errorf(n, "a string constant shows nothing")
	}
	isPath := n.Op == "->" || n.Op == "." || c.isOperand(n)
	if e.Format == FormatBuf {
		return f, c.showBuf(e, isPath, i, off)
	}
	if (e.Format == FormatIPv6 || e.Format == FormatStr) && !isPath {
		return f, c.errorf(n, "%s() wants an argument or a member", e.Format)
	}
	if isPath {
		x, err := c.lvalue(n)
		if err != nil {
			return f, err
		}
		f.Type = x.t
		if e.Format == FormatIPv6 {
			return f, c.showIPv6(n, x, i, off)
		}
		if _, isPtr := btf.UnderlyingType(x.t).(*btf.Pointer); isPtr && e.Format == FormatStr || c.isString(x) {
			f.String = true
			return f, c.showString(n, x, i, off)
		}
		if _, err := c.load(n, x); err != nil {
			return f, err
		}
	} else {
		v, err := c.value(n)
		if err != nil {
			return f, err
		}
		if v.isConst {
			c.b.emit(asm.LoadImm(asm.R0, v.c, asm.DWord))
		}
		f.Type = &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}
		if !v.signed && !v.isConst {
			f.Type = &btf.Int{Name: "unsigned long", Size: 8}
		}
	}
	c.b.emit(asm.StoreMem(rDst, int16(off), asm.R0, asm.DWord))
	c.mark(i)
	return f, nil
}

// isString says whether x is a char pointer, or a char array in kernel
// memory.
func (c *compiler) isString(x lval) bool {
	var elem btf.Type
	switch u := btf.UnderlyingType(x.t).(type) {
	case *btf.Pointer:
		elem = u.Target
	case *btf.Array:
		if x.rec {
			return false
		}
		elem = u.Type
	default:
		return false
	}
	i, ok := btf.UnderlyingType(elem).(*btf.Int)
	return ok && i.Size == 1 && (i.Encoding&btf.Char != 0 || i.Name == "char")
}

// showString reads the string at x into the block.
func (c *compiler) showString(n *Node, x lval, i, off int) error {
	if _, ok := btf.UnderlyingType(x.t).(*btf.Pointer); ok {
		if _, err := c.load(n, x); err != nil {
			return err
		}
		c.b.emit(asm.Mov.Reg(asm.R3, asm.R0))
	} else {
		// A char array: R0 holds the address of what holds it.
		c.b.emit(asm.Mov.Reg(asm.R3, asm.R0), asm.Add.Imm(asm.R3, int32(x.off)))
	}
	// Kernel memory, or else user memory (a char * may be either).
	read := func(fn asm.BuiltinFunc) {
		c.b.emit(
			asm.LoadMem(asm.R3, asm.RFP, readOff, asm.DWord),
			asm.Mov.Reg(asm.R1, rDst),
			asm.Add.Imm(asm.R1, int32(off)),
			asm.Mov.Imm(asm.R2, ShowString),
			fn.Call(),
		)
	}
	c.b.emit(asm.StoreMem(asm.RFP, readOff, asm.R3, asm.DWord))
	read(asm.FnProbeReadKernelStr)
	done := c.b.label()
	c.b.jump(asm.JSGE.Imm(asm.R0, 0, ""), done)
	read(asm.FnProbeReadUserStr)
	c.b.jump(asm.JSLT.Imm(asm.R0, 0, ""), c.fail)
	c.b.place(done)
	c.mark(i)
	return nil
}

// showIPv6 copies the 16 bytes at x, an IPv6 address in kernel memory,
// into the block.
func (c *compiler) showIPv6(n *Node, x lval, i, off int) error {
	if size, err := btf.Sizeof(x.t); err != nil || size != 16 || x.rec || x.bitSize != 0 {
		return c.errorf(n, "ipv6() wants 16 bytes in kernel memory (struct in6_addr), not %s", typeName(x.t))
	}
	c.b.emit(
		asm.Mov.Reg(asm.R3, asm.R0),
		asm.Add.Imm(asm.R3, int32(x.off)),
		asm.Mov.Reg(asm.R1, rDst),
		asm.Add.Imm(asm.R1, int32(off)),
		asm.Mov.Imm(asm.R2, 16),
		asm.FnProbeReadKernel.Call(),
	)
	c.b.jump(asm.JNE.Imm(asm.R0, 0, ""), c.fail)
	c.mark(i)
	return nil
}

// mark sets bit i of the block's mask.
func (c *compiler) mark(i int) {
	c.b.emit(
		asm.LoadMem(asm.R1, rDst, 0, asm.DWord),
		asm.Or.Imm(asm.R1, int32(1)<<i),
		asm.StoreMem(rDst, 0, asm.R1, asm.DWord),
	)
}

// showBuf compiles buf(PTR, LEN): LEN, then up to ShowBuf bytes at PTR,
// from kernel or else user memory, into the block. A negative LEN reads
// nothing.
func (c *compiler) showBuf(e ShowExpr, isPath bool, i, off int) error {
	ptr := e.Expr
	c.e = e.Len
	n, err := c.value(e.Len.Root)
	if err != nil {
		return err
	}
	if n.isConst {
		c.b.emit(asm.LoadImm(asm.R0, n.c, asm.DWord))
	}
	c.b.emit(asm.StoreMem(rDst, int16(off), asm.R0, asm.DWord))
	c.e = ptr
	x, err := c.lvalue(ptr.Root)
	if err != nil {
		return err
	}
	if !isPath {
		return c.errorf(ptr.Root, "buf() wants an argument or a member as its pointer")
	}
	if _, isPtr := btf.UnderlyingType(x.t).(*btf.Pointer); !isPtr {
		return c.errorf(ptr.Root, "buf() wants a pointer, not %s", typeName(x.t))
	}
	if _, err := c.load(ptr.Root, x); err != nil {
		return err
	}
	c.b.emit(asm.StoreMem(asm.RFP, readOff, asm.R0, asm.DWord))
	done := c.b.label()
	read := func(fn asm.BuiltinFunc) {
		short := c.b.label()
		c.b.emit(asm.LoadMem(asm.R2, rDst, int16(off), asm.DWord))
		c.b.jump(asm.JSLE.Imm(asm.R2, 0, ""), done)
		c.b.jump(asm.JLE.Imm(asm.R2, ShowBuf, ""), short)
		c.b.emit(asm.Mov.Imm(asm.R2, ShowBuf))
		c.b.place(short)
		c.b.emit(
			asm.LoadMem(asm.R3, asm.RFP, readOff, asm.DWord),
			asm.Mov.Reg(asm.R1, rDst),
			asm.Add.Imm(asm.R1, int32(off+8)),
			fn.Call(),
		)
	}
	read(asm.FnProbeReadKernel)
	c.b.jump(asm.JEq.Imm(asm.R0, 0, ""), done)
	read(asm.FnProbeReadUser)
	c.b.jump(asm.JNE.Imm(asm.R0, 0, ""), c.fail)
	c.b.place(done)
	c.mark(i)
	return nil
}
