// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trawl-dev/trawl"
)

// maxCompletions caps the function names offered at once: a shell shows
// no more usefully, and a longer prefix narrows them.
const maxCompletions = 500

// completePatterns completes a pattern with the names of the kernel
// functions it can select, read from the running kernel (or from list's
// --root); after "--", the traced command, as the shell would.
func completePatterns(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	// The words to complete are the program's arguments (trawl __complete
	// WORD... TOCOMPLETE): cmd.ArgsLenAtDash cannot tell, as cobra parses
	// them with a "--" of its own added.
	if len(os.Args) > 2 && slices.Contains(os.Args[2:len(os.Args)-1], "--") {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return completeFunctions(cmd, nil, toComplete)
}

// completeFunctions completes the name of a traceable kernel function:
// a prefix with an optional "!" and "MODULE:" before it.
func completeFunctions(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	root := ""
	if f := cmd.Flags().Lookup("root"); f != nil {
		root = f.Value.String()
	}
	names, err := functionNames(root, toComplete)
	if err != nil {
		return cobra.AppendActiveHelp(nil, err.Error()), cobra.ShellCompDirectiveNoFileComp
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// functionNames returns the names of the functions that the pattern
// toComplete followed by "*" selects from the kernel files under root
// (the running kernel's for ""), each with toComplete's "!" and
// "MODULE:", at most maxCompletions of them; none when toComplete is
// already a glob or a regular expression, or selects nothing.
func functionNames(root, toComplete string) ([]string, error) {
	bang, rest := "", toComplete
	if r, ok := strings.CutPrefix(rest, "!"); ok {
		bang, rest = "!", r
	}
	module, name := "", rest
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		module, name = rest[:i+1], rest[i+1:]
	}
	if strings.ContainsAny(name, `*?[]\/(`) {
		return nil, nil
	}
	sel, err := listFunctions([]string{module + name + "*"}, root, false, btfFlags{}, nil)
	if errors.Is(err, trawl.ErrNoMatch) || errors.Is(err, trawl.ErrBadPattern) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, fn := range sel.Selected {
		c := bang + module + fn.Name
		// The catalogue is sorted by name: copies of a name are adjacent.
		if len(names) > 0 && names[len(names)-1] == c {
			continue
		}
		if len(names) == maxCompletions {
			break
		}
		names = append(names, c)
	}
	return names, nil
}
