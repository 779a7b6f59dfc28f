// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trawl-dev/trawl"
)

// listFlags are the flags of trawl list.
type listFlags struct {
	verbose bool
	json    bool
	root    string
	noCache bool
	btf     btfFlags
}

func newListCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "list [flags] PATTERN...",
		Short: "List the kernel functions patterns select, with prototypes",
		Long: `list shows the kernel functions the patterns select, one C prototype a line,
module functions tagged [module]; --verbose also shows the functions a pattern
matched but that trawl leaves out, and why (deny list, not traceable, no
prototype).

A PATTERN is [!][MODULE:]NAME[(TYPE, ...)], NAME a glob or a /regexp/:
'tcp_*' '!tcp_v6_*' 'nf_conntrack:*' '/^vfs_(read|write)$/'
'*(struct sk_buff *)' (docs/patterns.md).

A tracepoint PATTERN is [!]tp:SUBSYSTEM[:EVENT], both globs: 'tp:sched:*'
'tp:skb:kfree_skb' 'tp:*' list the kernel's BTF-typed tracepoints with the
arguments their programs read.`,
		Example: `  trawl list 'tcp_*' '!tcp_v6_*'
  trawl list -v 'migrate_*'
  trawl list --json '*(struct sk_buff *)'
  trawl list 'tp:sched:*'`,
		ValidArgsFunction: completePatterns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runList(args, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "also show the matched functions that are excluded, and why")
	fs.BoolVar(&f.json, "json", false, "print JSON, for programs")
	fs.StringVar(&f.root, "root", "", "read kernel files (sys/kernel/btf, proc/kallsyms, tracefs) under `DIR` instead of /")
	fs.BoolVar(&f.noCache, "no-cache", false, noCacheUsage)
	cmd.MarkFlagDirname("root")
	f.btf.register(cmd)
	return cmd
}

func runList(patterns []string, f listFlags, stdout, stderr io.Writer) error {
	if len(patterns) == 0 {
		return fmt.Errorf("%w: list needs at least one pattern (use '*' for every function)", errUsage)
	}
	if err := checkExclusions(patterns); err != nil {
		return err
	}
	note := func(n string) { fmt.Fprintln(stderr, "trawl: note:", oneLine(n)) }
	sel, err := listFunctions(patterns, f.root, f.noCache, f.btf, note)
	if err != nil {
		return err
	}
	if f.json {
		err = writeJSON(stdout, sel)
	} else {
		err = writeText(stdout, sel, f.verbose)
	}
	if errors.Is(err, syscall.EPIPE) {
		// The reader took what it wanted (trawl list '*' | head).
		return nil
	}
	return err
}

// listFunctions lists what the patterns select from the kernel files
// under root, or from the running kernel when root is "" (through the
// catalogue cache unless noCache), with the kernel's BTF from the files
// of btf if set.
func listFunctions(patterns []string, root string, noCache bool, btf btfFlags, notify func(string)) (*trawl.Selection, error) {
	if root != "" {
		if err := checkDir(root); err != nil {
			return nil, fmt.Errorf("%w: --root: %w", errUsage, err)
		}
	}
	return trawl.List(patterns, trawl.ListOptions{Root: root, BTF: btf.file, BTFDir: btf.dir, Notify: notify, NoCache: noCache})
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

func writeText(w io.Writer, sel *trawl.Selection, verbose bool) error {
	for _, fn := range sel.Selected {
		if _, err := fmt.Fprintln(w, describe(fn, verbose)); err != nil {
			return err
		}
	}
	if !verbose {
		return nil
	}
	for _, ex := range sel.Excluded {
		if _, err := fmt.Fprintf(w, "excluded: %s%s: %s\n", ex.Name, moduleTag(ex), ex.Excluded); err != nil {
			return err
		}
	}
	return nil
}

// describe writes a function as one line: its C prototype, or its name and
// why there is no prototype, and with verbose how it is read then; module
// functions end with [module].
func describe(fn trawl.Function, verbose bool) string {
	if fn.Prototype != "" {
		return fn.Prototype + moduleTag(fn)
	}
	line := fmt.Sprintf("%s(?)%s  (no BTF prototype: %s", fn.Name, moduleTag(fn), fn.Note)
	if !verbose {
		return line + ")"
	}
	switch {
	case fn.RetGuessed:
		return line + "; read: arguments as raw registers, the return value guessed as " + fn.Ret + ", an errno from -4095 to -1)"
	case fn.Ret == "":
		return line + "; read: arguments as raw registers, no return value)"
	}
	return line + "; read: arguments as raw registers, the return value as " + fn.Ret + ")"
}

func moduleTag(fn trawl.Function) string {
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
	RetGuess  bool      `json:"ret_guessed,omitempty"`
	Excluded  string    `json:"excluded,omitempty"`
}

type jsonArg struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Class  string `json:"class"`
	Size   int    `json:"size"`
	Budget int    `json:"budget,omitempty"`
}

func writeJSON(w io.Writer, sel *trawl.Selection) error {
	out := jsonList{Functions: []jsonFunc{}, Excluded: []jsonFunc{}}
	for _, fn := range sel.Selected {
		jf, err := toJSON(fn)
		if err != nil {
			return err
		}
		out.Functions = append(out.Functions, jf)
	}
	for _, ex := range sel.Excluded {
		jf, err := toJSON(ex)
		if err != nil {
			return err
		}
		jf.Excluded = ex.Excluded
		out.Excluded = append(out.Excluded, jf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}

func toJSON(fn trawl.Function) (jsonFunc, error) {
	if fn.Err != nil {
		return jsonFunc{}, fmt.Errorf("plan %s: %w", fn.Name, fn.Err)
	}
	jf := jsonFunc{Name: fn.Name, Module: fn.Module, BTFID: fn.BTFID, Note: fn.Note, Slots: fn.Slots, Prototype: fn.Prototype, Ret: fn.Ret, RetGuess: fn.RetGuessed}
	for _, a := range fn.Addrs {
		jf.Addrs = append(jf.Addrs, fmt.Sprintf("0x%x", a))
	}
	for _, a := range fn.Args {
		jf.Args = append(jf.Args, jsonArg{Name: a.Name, Type: a.Type, Class: a.Class, Size: a.Size, Budget: a.Budget})
	}
	return jf, nil
}
