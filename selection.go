// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"os"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/selector"
)

// Selection is what patterns select from the kernel's functions.
type Selection struct {
	// Selected are the functions to trace, sorted by name then module.
	Selected []Function
	// Excluded are the functions a pattern matched but that are left out,
	// each with Excluded saying why.
	Excluded []Function
}

// Function is a kernel function and how trawl captures its arguments.
type Function struct {
	// Name is the symbol name, compiler suffix included ("foo.isra.0").
	Name string
	// Module is the module the function lives in, "" for vmlinux.
	Module string
	// Addrs are the function's entry addresses, ascending; nil when the
	// kernel hides them or when they cannot be told apart.
	Addrs []uint64
	// BTFID is the function's type ID in its BTF (vmlinux, or the
	// module's), 0 without a prototype.
	BTFID uint32
	// Prototype is the C declaration, "" without a BTF prototype.
	Prototype string
	// Note says why there is no prototype, or how a suffixed symbol was
	// matched to its prototype.
	Note string
	// Slots is the number of 8-byte slots the arguments take.
	Slots int
	// Args are the arguments, Ret the return type ("" for void).
	// Without a prototype, Args is empty (the argument registers are
	// read raw) and Ret is the return type a compiler clone keeps of the
	// function it was made from, or, with RetGuessed, "long": the return
	// register read whole, a guess.
	Args       []Arg
	Ret        string
	RetGuessed bool
	// Excluded says why a matched function is left out, "" for a
	// selected one.
	Excluded string
	// Err says why trawl cannot plan the capture of the function's
	// arguments (a type it does not know), nil when it can.
	Err error
}

// Arg is an argument of a function and how it is captured.
type Arg struct {
	Name string
	// Type is the C type.
	Type string
	// Class is how the value is captured: "void", "signed", "unsigned",
	// "bool", "enum", "string", "ptr-struct", "ptr", "struct", "float" or
	// "buffer".
	Class string
	// Size is the size of the value in bytes, Budget the bytes captured
	// behind a pointer (0 for none).
	Size, Budget int
}

// ListOptions say where List reads the kernel's functions.
type ListOptions struct {
	// Root, if set, is a directory laid out like / (sys/kernel/btf,
	// proc/kallsyms, sys/kernel/tracing) to read instead of the running
	// kernel's files.
	Root string
	// BTF and BTFDir, if set, are files of the kernel's BTF to read in
	// place of sys/kernel/btf, as Config.BTF and Config.BTFDir are (for
	// the running kernel, see UseBTF).
	BTF, BTFDir string
	// Capture sets the budgets Arg.Budget shows.
	Capture CaptureOptions
	// Notify, if set, receives one-line notices for the user (a degraded
	// source of kernel facts).
	Notify func(string)
	// CatalogueCache and NoCache are as in Config; they do not apply to
	// Root.
	CatalogueCache string
	NoCache        bool
}

// List returns what the patterns select, without tracing anything.
func List(patterns []string, opts ListOptions) (*Selection, error) {
	if err := checkCacheDir(opts.CatalogueCache, opts.NoCache); err != nil {
		return nil, &configError{err}
	}
	var cat *kernel.Catalogue
	var err error
	if err := checkBTF(opts.BTF, opts.BTFDir); err != nil {
		return nil, err
	}
	switch {
	case opts.Root != "" && opts.BTF != "":
		cat, err = kernel.Load(kernel.WithBTF(os.DirFS(opts.Root), kernel.ExternalBTF{File: opts.BTF, Dir: opts.BTFDir}))
	case opts.Root != "":
		cat, err = kernel.Load(os.DirFS(opts.Root))
	default:
		if err := UseBTF(opts.BTF, opts.BTFDir); err != nil {
			return nil, err
		}
		var release func()
		cat, release, err = kernel.Hold(catalogueCache(opts.CatalogueCache, opts.NoCache))
		if err == nil {
			defer release()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load the kernel's functions: %w", err)
	}
	if n := cat.Notice(); n != "" && opts.Notify != nil {
		opts.Notify(n)
	}
	sel, err := selector.Select(cat, patterns)
	if err != nil {
		return nil, publicError(err)
	}
	cat.WriteCache()
	return newSelection(sel, opts.Capture), nil
}

// newSelection describes a selection.
func newSelection(sel *selector.Selection, capture CaptureOptions) *Selection {
	out := &Selection{Selected: make([]Function, 0, len(sel.Selected)), Excluded: make([]Function, 0, len(sel.Excluded))}
	planner := plan.NewPlanner(capture.budgets())
	for _, fn := range sel.Selected {
		out.Selected = append(out.Selected, newFunction(fn, planner))
	}
	for _, ex := range sel.Excluded {
		f := newFunction(ex.Func, planner)
		f.Excluded = ex.Reason
		out.Excluded = append(out.Excluded, f)
	}
	return out
}

// budgets returns the capture plan's options.
func (c CaptureOptions) budgets() plan.Options {
	o := plan.Options{StructBudget: c.StructBytes, StringBudget: c.StringBytes, BufferBudget: c.BufferBytes, Depth: c.Depth, CallBudget: c.CallBytes}
	for _, b := range c.Buffers {
		o.Buffers = append(o.Buffers, plan.BufferSpec(b))
	}
	return o
}

func newFunction(fn *kernel.Function, planner *plan.Planner) Function {
	f := Function{Name: fn.Name, Module: fn.Module, Addrs: fn.Addrs, BTFID: uint32(fn.BTFID), Note: fn.ProtoNote}
	proto := fn.Proto()
	if proto != nil {
		f.Prototype = kernel.Declaration(proto.Type, fn.Name)
	}
	p, err := planner.Plan(fn)
	if err != nil {
		f.Err = err
		return f
	}
	f.Slots = p.NumSlots
	if p.Ret.Class != plan.Void {
		f.Ret = kernel.TypeString(p.Ret.Type)
	}
	f.RetGuessed = p.Ret.Guessed
	for _, a := range p.Args {
		f.Args = append(f.Args, Arg{Name: a.Name, Type: kernel.TypeString(a.Type), Class: a.Class.String(), Size: a.Size, Budget: a.Budget})
	}
	return f
}
