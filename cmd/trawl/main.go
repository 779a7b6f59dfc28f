// SPDX-License-Identifier: Apache-2.0

// Command trawl traces many kernel functions at once with one generic BPF
// program, decoding arguments and return values with the kernel's BTF.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// command is a subcommand of trawl.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands maps each subcommand name to its implementation. Add new
// subcommands here.
var commands = map[string]command{
	"list":     {"show the kernel functions patterns select, with prototypes", runList},
	"features": {"show which attach mechanisms the running kernel supports; with patterns, the backend auto picks", runFeatures},
}

// hidden are subcommands trawl runs itself, left out of the usage.
var hidden = map[string]command{
	gateCommand:     {"", runGate},
	workloadCommand: {"", runWorkload},
}

// errUsage marks command-line mistakes, which exit with status 2.
var errUsage = errors.New("usage")

// main exits 0 on success, 2 on a usage error, 1 on other errors; with a
// command, with the command's status; interrupted before tracing began,
// with 128 + the signal's number.
func main() {
	err := run(handleSignals(), os.Args[1:], os.Stdout, os.Stderr)
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "trawl:", ee.msg)
		}
		os.Exit(ee.status)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "trawl:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "trawl:", err)
		os.Exit(1)
	}
}

// run runs the trawl command line args (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: no command given", errUsage)
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if h, isHidden := hidden[args[0]]; isHidden {
		cmd, ok = h, true
	}
	if !ok {
		// Anything else is a pattern: trace.
		return runTrace(ctx, args, stdout, stderr)
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: trawl [flags] PATTERN... [-- COMMAND [ARGS...]]   trace kernel functions\n       trawl COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-8s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'trawl COMMAND -h' for a command's flags.")
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, and returns the positional arguments.
// Arguments after "--" are positional too.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, rest, err := parseUntilDash(fs, args)
	return append(pos, rest...), err
}

// parseUntilDash parses flags interspersed with positional arguments up to
// "--", and returns the positional arguments and those after "--".
func parseUntilDash(fs *flag.FlagSet, args []string) (pos, rest []string, err error) {
	for len(args) > 0 {
		if args[0] == "--" {
			return pos, args[1:], nil
		}
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		left := fs.Args()
		// The flag package eats a "--" that ends the flags.
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return pos, left, nil
		}
		if len(left) == 0 {
			break
		}
		pos = append(pos, left[0])
		args = left[1:]
	}
	return pos, nil, nil
}

// oneLine keeps a message on one line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }
