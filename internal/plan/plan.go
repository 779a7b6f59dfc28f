// SPDX-License-Identifier: Apache-2.0

// Package plan turns a kernel function's BTF prototype into a capture plan:
// plain data that tells the generic BPF program where each argument lives
// (trampoline context slot, or kprobe register / stack offset on x86-64 and
// arm64), how to read it (class) and how many bytes to copy, without the
// BPF side knowing BTF. Plans also say, per backend, architecture and
// kernel version, whether the function can be attached at all.
package plan

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf/btf"
	"github.com/trawl-dev/trawl/internal/kernel"
)

// Default byte budgets, as in retsnoop (256 bytes per captured argument).
const (
	DefaultStructBudget = 256
	DefaultStringBudget = 128
)

// sockaddrIn6Size is the size of struct sockaddr_in6, which a struct
// sockaddr * may point to.
const sockaddrIn6Size = 28

// Options tune plans.
type Options struct {
	// StructBudget caps the bytes copied behind a pointer to a struct or
	// union. 0 means DefaultStructBudget.
	StructBudget int
	// StringBudget caps the bytes copied of a char * string. 0 means
	// DefaultStringBudget.
	StringBudget int
	// BufferBudget caps the bytes copied of a sized buffer (see
	// BufferPairs). 0 means DefaultBufferBudget.
	BufferBudget int
	// Buffers name sized buffers BufferPairs does not find.
	Buffers []BufferSpec
	// Depth is how many pointers deep structs are captured: 0 or 1, the
	// struct an argument points to; 2, also the structs its members point
	// to (see Deep); and so on.
	Depth int
	// CallBudget caps the bytes a call captures in all, arguments first,
	// then the structs Depth reaches, which are cut when it runs out. 0
	// means DefaultCallBudget, and more is not copied.
	CallBudget int
}

// Plan is the capture plan of one kernel function.
type Plan struct {
	// Func identifies the function: name, module, addresses, BTF
	// prototype and ID. Without a prototype, Args is empty and only raw
	// argument registers can be read, and Ret is the return type the
	// catalogue knows of a compiler clone, or a guess.
	Func *kernel.Function
	// Proto is Func's BTF prototype, nil without one: read once here, as
	// Func.Proto decodes it from the kernel's BTF at each call.
	Proto *btf.Func
	// NumSlots is the number of 8-byte slots the arguments take in a
	// trampoline context (what bpf_get_func_arg_cnt returns): a 16-byte
	// struct by value takes two.
	NumSlots int
	// Args are the arguments in order.
	Args []Arg
	// Ret is the return value.
	Ret Ret
	// Variadic is set for functions ending in "...": only the fixed
	// arguments are planned.
	Variadic bool
	// Deep are the structs captured behind pointers in captured memory,
	// with Options.Depth above 1, parents before children.
	Deep []Deep
	// Packets are the packet headers of the sk_buff arguments.
	Packets []Packet
	// Windows are the members of struct arguments past their Budget
	// that the structs' views show.
	Windows []Window
	// Members are the strings and file paths behind the members of the
	// structs captured, after them.
	Members []Member
	// Track is set with --track: which arguments have the tracked
	// pointer type (see MarkTrack).
	Track Track
}

// Track says how a function handles objects of the type --track follows.
type Track struct {
	// Args are the indices of the arguments of the type.
	Args []int
	// Ret is set when the function returns a pointer of the type.
	Ret bool
	// Free is set when the function frees the objects of the type it
	// receives, Drop when it drops a reference to them.
	Free, Drop bool
}

// MarkTrack notes in p.Track the arguments and the return value whose
// type is, as is tells, the type --track follows; life is the function's
// part in the end of such objects' life (a Track with Free or Drop set).
// It returns whether an argument has the type.
func (p *Plan) MarkTrack(is func(btf.Type) bool, life Track) bool {
	p.Track = Track{Free: life.Free, Drop: life.Drop}
	for i, a := range p.Args {
		if a.NumSlots == 1 && is(a.Type) {
			p.Track.Args = append(p.Track.Args, i)
		}
	}
	p.Track.Ret = p.Ret.Type != nil && is(p.Ret.Type)
	return len(p.Track.Args) > 0
}

// Arg is one argument of a plan.
type Arg struct {
	// Name is the parameter name, "" if BTF has none.
	Name string
	// Type is the parameter's BTF type.
	Type btf.Type
	// Class tells how to read the argument.
	Class Class
	// Size is the size of the value itself, in bytes: 1 to 8 for scalars
	// and pointers, the struct size for a struct by value.
	Size int
	// Budget is how many bytes to copy behind a pointer (Class String,
	// PtrStruct or Buffer), 0 for other classes.
	Budget int
	// Slot is the first trampoline context slot of the argument.
	Slot int
	// NumSlots is 1, or 2 for a struct by value of 9 to 16 bytes (more
	// for larger structs, which trampolines reject).
	NumSlots int
	// Kprobe is where the argument lives at function entry, per Arch.
	Kprobe [numArch]Loc
	// Buffer, for Class Buffer, tells how the buffer's length is known.
	Buffer *SizedBuffer
}

// Ret is the return value of a plan.
type Ret struct {
	Type  btf.Type // nil for void
	Class Class
	Size  int
	// Guessed is set for a function whose return type nothing tells (no
	// prototype, and not a clone that keeps its base function's): Type is
	// then a signed long, the return register as a whole, but Size is 4:
	// an int return leaves the register's upper half zero, so an error is
	// told by the lower half, from -4095 to -1, which a long or an error
	// pointer has too (see decode.GuessedRet).
	Guessed bool
}

// guessedReturn is the type shown of a return value nothing tells the
// type of: the whole return register, signed.
var guessedReturn = &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed}

// New makes the plan of fn. Functions without a prototype get a raw plan
// (no Args, and the return type of rawPlan). It fails only on a prototype
// it cannot make sense of.
func New(fn *kernel.Function, opts Options) (*Plan, error) {
	return NewPlanner(opts).Plan(fn)
}

// Planner makes the plans of many functions with the same Options,
// working out each BTF prototype once: a plan depends on its function
// only through its prototype, which BTF shares between the functions of
// one signature (56,000 functions of an x86-64 7.x kernel have 25,000),
// and through the sized buffers Options.Buffers names it in. The plans of
// one prototype share their Args, Deep, Packets, Windows and Members: a
// caller that changes them copies them first. Not safe for concurrent
// use.
type Planner struct {
	opts   Options
	protos map[*btf.FuncProto]protoPlan
}

// protoPlan is the plan of a prototype, or why there is none.
type protoPlan struct {
	p   *Plan
	err error
}

// NewPlanner returns a planner with opts.
func NewPlanner(opts Options) *Planner {
	if opts.StructBudget <= 0 {
		opts.StructBudget = DefaultStructBudget
	}
	if opts.StringBudget <= 0 {
		opts.StringBudget = DefaultStringBudget
	}
	if opts.BufferBudget <= 0 {
		opts.BufferBudget = DefaultBufferBudget
	}
	if opts.CallBudget <= 0 || opts.CallBudget > DefaultCallBudget {
		opts.CallBudget = DefaultCallBudget
	}
	return &Planner{opts: opts, protos: map[*btf.FuncProto]protoPlan{}}
}

// Plan makes the plan of fn, as New does.
func (pl *Planner) Plan(fn *kernel.Function) (*Plan, error) {
	fnProto := fn.Proto()
	if fnProto == nil {
		return rawPlan(fn)
	}
	proto, ok := fnProto.Type.(*btf.FuncProto)
	if !ok {
		return nil, fmt.Errorf("%s: BTF function has no prototype but %s", fn.Name, fnProto.Type)
	}
	pp, ok := pl.protos[proto]
	if named := slices.ContainsFunc(pl.opts.Buffers, func(b BufferSpec) bool { return b.Func == fn.Name }); named || !ok {
		pp.p, pp.err = planProto(fn, fnProto, proto, pl.opts)
		if !named {
			pl.protos[proto] = pp
		}
	}
	if pp.err != nil {
		return nil, fmt.Errorf("%s: %w", fn.Name, pp.err)
	}
	p := *pp.p
	p.Func, p.Proto = fn, fnProto
	return &p, nil
}

// rawPlan plans a function without a prototype: no Args, and the return
// type the catalogue knows of a compiler clone, or else a guess.
func rawPlan(fn *kernel.Function) (*Plan, error) {
	t, known := fn.Return()
	if !known {
		return &Plan{Func: fn, Ret: Ret{Type: guessedReturn, Class: Signed, Size: 4, Guessed: true}}, nil
	}
	ret, err := newRet(t)
	if err != nil {
		return nil, fmt.Errorf("%s: return value: %w", fn.Name, err)
	}
	return &Plan{Func: fn, Ret: ret}, nil
}

// planProto plans fn's prototype proto. Its errors do not name fn.
func planProto(fn *kernel.Function, fnProto *btf.Func, proto *btf.FuncProto, opts Options) (*Plan, error) {
	p := &Plan{Func: fn, Proto: fnProto}
	params := proto.Params
	if kernel.IsVariadic(proto) {
		p.Variadic = true
		params = params[:len(params)-1]
	}
	var err error
	if p.Ret, err = newRet(proto.Return); err != nil {
		return nil, fmt.Errorf("return value: %w", err)
	}
	p.Args = make([]Arg, len(params))
	for i, param := range params {
		a, err := newArg(param, opts)
		if err != nil {
			return nil, fmt.Errorf("argument %d (%s): %w", i+1, param.Name, err)
		}
		a.Slot = p.NumSlots
		p.NumSlots += a.NumSlots
		p.Args[i] = a
	}
	if err := pairBuffers(p, opts.Buffers, opts.BufferBudget); err != nil {
		return nil, err
	}
	planPackets(p)
	planViews(p, opts)
	planDeep(p, opts)
	planMembers(p, opts)
	placeAMD64(p.Args, p.Ret)
	placeARM64(p.Args)
	return p, nil
}

func newArg(param btf.FuncParam, opts Options) (Arg, error) {
	c, size, err := classify(param.Type)
	if err != nil {
		return Arg{}, err
	}
	a := Arg{Name: param.Name, Type: param.Type, Class: c, Size: size, NumSlots: max(1, (size+7)/8)}
	switch c {
	case String:
		a.Budget = opts.StringBudget
	case PtrStruct:
		target, _ := pointee(param.Type)
		n, err := btf.Sizeof(target)
		if err != nil {
			return Arg{}, fmt.Errorf("size of %s: %w", kernel.TypeString(target), err)
		}
		if s, ok := target.(*btf.Struct); ok && (s.Name == "sockaddr" || s.Name == "sockaddr_unsized") {
			// Often a struct sockaddr_in6 (28 bytes) in truth; 7.x
			// passes sockaddr_unsized, two bytes and a flexible array.
			n = max(n, sockaddrIn6Size)
		}
		a.Budget = min(n, opts.StructBudget)
	}
	return a, nil
}

func newRet(t btf.Type) (Ret, error) {
	if _, void := t.(*btf.Void); void || t == nil {
		return Ret{Class: Void}, nil
	}
	c, size, err := classify(t)
	if err != nil {
		return Ret{}, err
	}
	return Ret{Type: t, Class: c, Size: size}, nil
}
