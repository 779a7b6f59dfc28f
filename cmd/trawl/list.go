// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
	"github.com/trawl-dev/trawl/internal/selector"
)

func runList(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "also show the matched functions that are excluded, and why")
	asJSON := fs.Bool("json", false, "print JSON for programs")
	root := fs.String("root", "", "read kernel files (sys/kernel/btf, proc/kallsyms, tracefs) under `DIR` instead of /")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: trawl list [-v] [-json] [-root DIR] PATTERN...\n\n"+
			"Patterns: [!][MODULE:]NAME[(TYPE, ...)] where NAME is a glob or /regexp/,\n"+
			"e.g. 'tcp_*' '!tcp_v6_*' 'nf_conntrack:*' '/^vfs_(read|write)$/' '*(struct sk_buff *)'\n\nFlags:")
		fs.PrintDefaults()
	}
	patterns, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(patterns) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: list needs at least one pattern (use '*' for every function)", errUsage)
	}

	var cat *kernel.Catalogue
	if *root != "" {
		if err := checkDir(*root); err != nil {
			return fmt.Errorf("%w: -root: %w", errUsage, err)
		}
		cat, err = kernel.Load(os.DirFS(*root))
	} else {
		cat, err = kernel.Live()
	}
	if err != nil {
		return fmt.Errorf("load the kernel's functions: %w", err)
	}
	if n := cat.Notice(); n != "" {
		fmt.Fprintln(stderr, "trawl: note:", oneLine(n))
	}
	sel, err := selector.Select(cat, patterns)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, sel)
	}
	return writeText(stdout, sel, *verbose)
}

// checkDir fails unless dir is a directory, saying what it is instead.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

func writeText(w io.Writer, sel *selector.Selection, verbose bool) error {
	for _, fn := range sel.Selected {
		if _, err := fmt.Fprintln(w, describe(fn)); err != nil {
			return err
		}
	}
	if !verbose {
		return nil
	}
	for _, ex := range sel.Excluded {
		if _, err := fmt.Fprintf(w, "excluded: %s%s: %s\n", ex.Func.Name, moduleTag(ex.Func), ex.Reason); err != nil {
			return err
		}
	}
	return nil
}

// describe writes a function as one line: its C prototype, or its name and
// why there is no prototype; module functions end with [module].
func describe(fn *kernel.Function) string {
	if fn.Proto == nil {
		return fmt.Sprintf("%s(?)%s  (no BTF prototype: %s)", fn.Name, moduleTag(fn), fn.ProtoNote)
	}
	proto := kernel.Declaration(fn.Proto.Type, fn.Name)
	return proto + moduleTag(fn)
}

func moduleTag(fn *kernel.Function) string {
	if fn.Module == "" {
		return ""
	}
	return " [" + fn.Module + "]"
}

type jsonList struct {
	Functions []jsonFunc `json:"functions"`
	Excluded  []jsonFunc `json:"excluded"`
}

type jsonFunc struct {
	Name      string    `json:"name"`
	Module    string    `json:"module,omitempty"`
	Addrs     []string  `json:"addrs,omitempty"`
	Prototype string    `json:"prototype,omitempty"`
	BTFID     uint32    `json:"btf_id,omitempty"`
	Note      string    `json:"note,omitempty"`
	Slots     int       `json:"slots"`
	Args      []jsonArg `json:"args,omitempty"`
	Ret       string    `json:"ret,omitempty"`
	Excluded  string    `json:"excluded,omitempty"`
}

type jsonArg struct {
	Name   string     `json:"name"`
	Type   string     `json:"type"`
	Class  plan.Class `json:"class"`
	Size   int        `json:"size"`
	Budget int        `json:"budget,omitempty"`
}

func writeJSON(w io.Writer, sel *selector.Selection) error {
	out := jsonList{Functions: []jsonFunc{}, Excluded: []jsonFunc{}}
	for _, fn := range sel.Selected {
		jf, err := toJSON(fn)
		if err != nil {
			return err
		}
		out.Functions = append(out.Functions, jf)
	}
	for _, ex := range sel.Excluded {
		jf, err := toJSON(ex.Func)
		if err != nil {
			return err
		}
		jf.Excluded = ex.Reason
		out.Excluded = append(out.Excluded, jf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}

func toJSON(fn *kernel.Function) (jsonFunc, error) {
	p, err := plan.New(fn, plan.Options{})
	if err != nil {
		return jsonFunc{}, fmt.Errorf("plan %s: %w", fn.Name, err)
	}
	jf := jsonFunc{Name: fn.Name, Module: fn.Module, BTFID: uint32(fn.BTFID), Note: fn.ProtoNote, Slots: p.NumSlots}
	for _, a := range fn.Addrs {
		jf.Addrs = append(jf.Addrs, fmt.Sprintf("0x%x", a))
	}
	if fn.Proto != nil {
		jf.Prototype = kernel.Declaration(fn.Proto.Type, fn.Name)
		jf.Ret = kernel.TypeString(p.Ret.Type)
	}
	for _, a := range p.Args {
		jf.Args = append(jf.Args, jsonArg{Name: a.Name, Type: kernel.TypeString(a.Type), Class: a.Class, Size: a.Size, Budget: a.Budget})
	}
	return jf, nil
}
