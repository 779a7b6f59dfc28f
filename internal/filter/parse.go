// SPDX-License-Identifier: Apache-2.0

// Package filter is trawl's --filter language: C-like expressions over a
// traced function's arguments and return value, compiled per function from
// its BTF into BPF instructions that run in the kernel.
//
// Syntax:
//
//	expr    = expr "||" expr | expr "&&" expr | expr "|" expr | expr "&" expr
//	        | expr ("==" | "!=") expr | expr ("<" | "<=" | ">" | ">=") expr
//	        | expr "~" STRING | "!" expr | "-" expr | "(" expr ")" | operand
//	operand = NAME { "->" NAME | "." NAME } | "ret" | INTEGER | STRING
//
// with C's precedence. NAME is an argument of the function (as BTF names
// it), an enum constant of the kernel, or an address family (AF_INET...);
// ret is the return value. "->" follows a pointer to a struct or union,
// "." picks a member of one; fields are read from kernel memory when the
// filter runs. Integers are decimal, 0x hex or 0 octal. A char * argument
// or field (or char array field) compares with a string: == and != for
// equality, ~ for a glob whose only * is at the end: filename ~ "/tmp/*"
// holds for names starting with /tmp/.
//
// An expression without ret runs at function entry, before any capture
// work; one with ret runs at exit. A field that cannot be read (a NULL
// pointer, say) makes the whole expression false.
package filter

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is a bad expression, or one that does not fit a function; Pos is
// the byte offset of the offending token in Src.
type Error struct {
	Src string
	Pos int
	Msg string
	Err error // ErrMissing, or nil
}

// Unwrap returns ErrMissing for a function lacking a name, else nil.
func (e *Error) Unwrap() error { return e.Err }

// Error names the column and draws a caret under it.
func (e *Error) Error() string {
	return fmt.Sprintf("filter: %s at column %d\n  %s\n  %s^", e.Msg, e.Pos+1, e.Src, strings.Repeat(" ", e.Pos))
}

// Op is an operator.
type Op string

// Node is a node of the expression tree.
type Node struct {
	Op    Op     // "" for a leaf
	Pos   int    // byte offset in the source
	Name  string // leaf NAME, or the member name of "->" and "."
	Int   int64  // leaf INTEGER
	Str   string // leaf STRING
	IsInt bool   // leaf is INTEGER
	IsStr bool   // leaf is STRING
	X, Y  *Node  // operands; Y is nil for unary operators and members
}

// Expr is a parsed expression.
type Expr struct {
	Src  string
	Root *Node
}

// UsesRet reports whether the expression uses the return value, and so
// must run at function exit.
func (e *Expr) UsesRet() bool {
	var uses func(n *Node) bool
	uses = func(n *Node) bool {
		if n == nil {
			return false
		}
		if n.Op == "" && !n.IsInt && !n.IsStr && n.Name == "ret" {
			return true
		}
		return uses(n.X) || uses(n.Y)
	}
	return uses(e.Root)
}

// maxLen is the longest expression accepted.
const maxLen = 4096

// maxDepth bounds the nesting of the tree.
const maxDepth = 64

// Parse parses an expression.
func Parse(src string) (*Expr, error) {
	if len(src) > maxLen {
		return nil, &Error{Src: src[:80] + "...", Pos: 0, Msg: fmt.Sprintf("expression longer than %d bytes", maxLen)}
	}
	p := &parser{src: src}
	p.next()
	root, err := p.binary(0, 0)
	if err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	if p.tok.kind != tokEOF {
		return nil, p.errorf("unexpected %s", p.tok)
	}
	return &Expr{Src: src, Root: root}, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokName
	tokInt
	tokStr
	tokOp
)

type token struct {
	kind tokKind
	pos  int
	text string // the source text; the value for tokStr
	num  int64
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokStr:
		return strconv.Quote(t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

type parser struct {
	src string
	off int
	tok token
	err *Error // a lexing error, reported when the token is used
}

func (p *parser) errorf(format string, args ...any) *Error {
	return &Error{Src: p.src, Pos: p.tok.pos, Msg: fmt.Sprintf(format, args...)}
}

// ops are the operator tokens, longest first.
var ops = []string{"||", "&&", "==", "!=", "<=", ">=", "->", "|", "&", "<", ">", "!", "~", "-", ".", "(", ")"}

// next reads the next token into p.tok.
func (p *parser) next() {
	for p.off < len(p.src) && strings.ContainsRune(" \t\n\r", rune(p.src[p.off])) {
		p.off++
	}
	start := p.off
	p.tok = token{kind: tokEOF, pos: start}
	if p.off >= len(p.src) {
		return
	}
	c := p.src[p.off]
	switch {
	case c == '_' || isLetter(c):
		for p.off < len(p.src) && (p.src[p.off] == '_' || isLetter(p.src[p.off]) || isDigit(p.src[p.off])) {
			p.off++
		}
		p.tok = token{kind: tokName, pos: start, text: p.src[start:p.off]}
	case isDigit(c):
		for p.off < len(p.src) && (isLetter(p.src[p.off]) || isDigit(p.src[p.off])) {
			p.off++
		}
		text := p.src[start:p.off]
		p.tok = token{kind: tokInt, pos: start, text: text}
		u, err := strconv.ParseUint(text, 0, 64)
		if err != nil || strings.Contains(text, "_") {
			p.err = &Error{Src: p.src, Pos: start, Msg: fmt.Sprintf("bad integer %q", text)}
		}
		p.tok.num = int64(u)
	case c == '"':
		p.off++
		for p.off < len(p.src) && p.src[p.off] != '"' {
			if p.src[p.off] == '\\' {
				p.off++
			}
			p.off++
		}
		if p.off >= len(p.src) {
			p.err = &Error{Src: p.src, Pos: start, Msg: "string without its closing quote"}
			p.tok = token{kind: tokStr, pos: start}
			return
		}
		p.off++
		s, err := strconv.Unquote(p.src[start:p.off])
		if err != nil {
			p.err = &Error{Src: p.src, Pos: start, Msg: "bad escape in string"}
		}
		if strings.IndexByte(s, 0) >= 0 {
			p.err = &Error{Src: p.src, Pos: start, Msg: "string with a NUL byte"}
		}
		p.tok = token{kind: tokStr, pos: start, text: s}
	default:
		for _, op := range ops {
			if strings.HasPrefix(p.src[p.off:], op) {
				p.off += len(op)
				p.tok = token{kind: tokOp, pos: start, text: op}
				return
			}
		}
		p.err = &Error{Src: p.src, Pos: start, Msg: fmt.Sprintf("unexpected character %q", c)}
		p.tok = token{kind: tokOp, pos: start, text: string(c)}
		p.off++
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// precedence of binary operators, C's order; 0 is not binary.
func precedence(t token) int {
	if t.kind != tokOp {
		return 0
	}
	switch t.text {
	case "||":
		return 1
	case "&&":
		return 2
	case "|":
		return 3
	case "&":
		return 4
	case "==", "!=", "~":
		return 5
	case "<", "<=", ">", ">=":
		return 6
	}
	return 0
}

// binary parses operators of at least precedence min (precedence
// climbing); depth bounds the recursion.
func (p *parser) binary(min, depth int) (*Node, error) {
	x, err := p.unary(depth + 1)
	if err != nil {
		return nil, err
	}
	for {
		prec := precedence(p.tok)
		if prec == 0 || prec < min {
			return x, nil
		}
		op := p.tok
		p.next()
		y, err := p.binary(prec+1, depth+1)
		if err != nil {
			return nil, err
		}
		if op.text == "~" && !y.IsStr {
			return nil, &Error{Src: p.src, Pos: y.Pos, Msg: "~ wants a string pattern on its right, e.g. name ~ \"tmp*\""}
		}
		x = &Node{Op: Op(op.text), Pos: op.pos, X: x, Y: y}
	}
}

func (p *parser) unary(depth int) (*Node, error) {
	if p.err != nil {
		return nil, p.err
	}
	if depth > maxDepth {
		return nil, p.errorf("expression nested too deeply")
	}
	t := p.tok
	if t.kind == tokOp && (t.text == "!" || t.text == "-") {
		p.next()
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		if t.text == "-" && x.IsInt {
			x.Int, x.Pos = -x.Int, t.pos
			return x, nil
		}
		return &Node{Op: Op(t.text), Pos: t.pos, X: x}, nil
	}
	return p.postfix(depth)
}

func (p *parser) postfix(depth int) (*Node, error) {
	x, err := p.primary(depth)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokOp && (p.tok.text == "->" || p.tok.text == ".") {
		op := p.tok
		p.next()
		if p.err != nil {
			return nil, p.err
		}
		if p.tok.kind != tokName {
			return nil, p.errorf("want a member name after %s, found %s", op.text, p.tok)
		}
		if x.IsInt || x.IsStr {
			return nil, &Error{Src: p.src, Pos: op.pos, Msg: op.text + " after a constant"}
		}
		x = &Node{Op: Op(op.text), Pos: op.pos, Name: p.tok.text, X: x}
		p.next()
	}
	return x, nil
}

func (p *parser) primary(depth int) (*Node, error) {
	if p.err != nil {
		return nil, p.err
	}
	t := p.tok
	switch t.kind {
	case tokName:
		p.next()
		return &Node{Pos: t.pos, Name: t.text}, nil
	case tokInt:
		p.next()
		return &Node{Pos: t.pos, Int: t.num, IsInt: true}, nil
	case tokStr:
		p.next()
		return &Node{Pos: t.pos, Str: t.text, IsStr: true}, nil
	case tokOp:
		if t.text == "(" {
			p.next()
			x, err := p.binary(0, depth+1)
			if err != nil {
				return nil, err
			}
			if p.tok.kind != tokOp || p.tok.text != ")" {
				return nil, p.errorf("want ) to close the ( at column %d, found %s", t.pos+1, p.tok)
			}
			p.next()
			return x, nil
		}
	}
	return nil, p.errorf("want an argument, a constant or (, found %s", t)
}
