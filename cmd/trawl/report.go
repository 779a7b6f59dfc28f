// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

// reportFormats are the formats trawl report writes: those that need no
// live trace.
var reportFormats = []string{formatText, formatTree, formatJSON, formatStats, formatFolded, formatPerfetto, formatChromeJSON, formatHTML}

// reportFlags are the flags of trawl report.
type reportFlags struct {
	format string
	output string
}

func newReportCommand() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report [-f FORMAT] [-o FILE] FILE...",
		Short: "Write a recording of trawl -f json in another format",
		Long: `report reads the calls trawl wrote with -f json (-o FILE), from each FILE in
turn or from standard input for -, and writes them in another format, as the
trace would have: text, tree, json, stats (percentiles of the recorded
durations), folded, perfetto (needs -o), chrome-json or html. What the
recording lacks is said on standard error, not made up: durations of calls
whose entry or exit was not seen, and stacks of a recording made without
--stack, which folded and html then count under the function alone.`,
		Example: `  trawl -f json --stack -o rec.json 'vfs_*' -- make
  trawl report -f stats rec.json
  trawl report -f folded rec.json | flamegraph.pl > flame.svg
  trawl report -f html -o report.html rec.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(args, f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVarP(&f.format, "format", "f", formatText, "write `FORMAT`: "+strings.Join(reportFormats, ", "))
	fs.StringVarP(&f.output, "output", "o", "", "write to `FILE` instead of standard output")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(reportFormats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// validate refuses what cannot work before anything is read or written.
func (f reportFlags) validate(files []string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	if len(files) == 0 {
		return bad("report needs a recording: a FILE written with -f json -o FILE, or - for standard input")
	}
	if !slices.Contains(reportFormats, f.format) {
		return bad("--format %q: want one of %s", f.format, strings.Join(reportFormats, ", "))
	}
	if f.format == formatPerfetto && f.output == "" {
		return bad("--format perfetto writes a binary trace: name its file with -o FILE")
	}
	if len(slices.DeleteFunc(slices.Clone(files), func(s string) bool { return s != "-" })) > 1 {
		return bad("standard input (-) can be read only once")
	}
	if err := checkWritable(f.output); err != nil {
		return err
	}
	if out, err := os.Stat(f.output); err == nil {
		for _, file := range files {
			if in, err := os.Stat(file); err == nil && os.SameFile(in, out) {
				return bad("-o %s is the recording %s: writing it would erase it", f.output, file)
			}
		}
	}
	return nil
}

// runReport writes the calls of the recordings files in the format f asks.
func runReport(files []string, f reportFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := f.validate(files); err != nil {
		return err
	}
	inputs := make([]io.Reader, len(files))
	for i, name := range files {
		if name == "-" {
			inputs[i] = stdin
			continue
		}
		file, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("cannot read the recording: %w", err)
		}
		defer file.Close()
		inputs[i] = file
	}
	rep := &report{flags: f, stdout: stdout}
	err := rep.read(files, inputs)
	if rep.r == nil && err == nil {
		err = rep.start(0) // an empty recording: an empty table, page or trace
	}
	if rep.r != nil {
		err = errors.Join(err, rep.r.Close(), rep.close())
	}
	if errors.Is(err, syscall.EPIPE) {
		return nil // the reader took what it wanted
	}
	if err == nil {
		rep.lacks(stderr)
	}
	return err
}

// report renders the calls of recordings, counting what they lack.
type report struct {
	flags  reportFlags
	stdout io.Writer
	r      render.Renderer
	close  func() error
	// calls counts the calls, noDuration those without a duration and
	// noStack those without a stack, kernel or user.
	calls, noDuration, noStack int
}

// read renders the calls of each input in turn.
func (rep *report) read(names []string, inputs []io.Reader) error {
	var c call.Call
	for i, in := range inputs {
		name := names[i]
		if name == "-" {
			name = "standard input"
		}
		jr := render.NewJSONReader(in)
		for {
			err := jr.Read(&c)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if rep.r == nil {
				if err := rep.start(jr.WallOffset()); err != nil {
					return err
				}
			}
			rep.calls++
			if c.Duration == 0 {
				rep.noDuration++
			}
			if c.Stack == nil && c.UStack == nil {
				rep.noStack++
			}
			if err := rep.r.Call(&c); err != nil {
				return err
			}
		}
	}
	return nil
}

// start opens the output and makes the renderer, once the first call
// gave the wall-clock offset of the recording.
func (rep *report) start(wallOffset int64) error {
	w, closeOut := rep.stdout, func() error { return nil }
	if rep.flags.output != "" {
		file, err := openOutput(rep.flags.output)
		if err != nil {
			return err
		}
		out := &outputFile{file: file}
		w, closeOut = out, out.Close
	}
	opts := render.Options{WallOffset: wallOffset}
	var err error
	switch rep.flags.format {
	case formatText:
		rep.r = render.NewText(w, opts)
	case formatTree:
		rep.r = render.NewTree(w, opts)
	case formatJSON:
		rep.r = render.NewJSON(w, opts)
	case formatStats:
		rep.r, err = render.NewStats(w, render.StatsOptions{Options: opts})
	case formatFolded:
		rep.r = render.NewFolded(w)
	case formatPerfetto:
		rep.r = render.NewPerfettoProto(w, opts)
	case formatChromeJSON:
		rep.r = render.NewChromeJSON(w)
	case formatHTML:
		rep.r = render.NewHTML(w)
	}
	if err != nil {
		closeOut()
		return err
	}
	rep.close = closeOut
	return nil
}

// lacks says on stderr what the output misses because the recording
// does not hold it.
func (rep *report) lacks(stderr io.Writer) {
	format := rep.flags.format
	if rep.calls == 0 {
		fmt.Fprintln(stderr, "trawl: the recording holds no calls")
		return
	}
	if rep.noDuration > 0 && format != formatJSON && format != formatFolded {
		fmt.Fprintf(stderr, "trawl: %d of %d calls have no duration (their entry or exit was not seen, or the recording lacks it)", rep.noDuration, rep.calls)
		if format == formatStats || format == formatHTML {
			fmt.Fprint(stderr, ": they count in no latency figure")
		}
		fmt.Fprintln(stderr)
	}
	if format != formatFolded && format != formatHTML {
		return
	}
	switch {
	case rep.noStack == rep.calls:
		fmt.Fprintln(stderr, "trawl: the recording has no stacks (record with --stack): each call counts under its function alone")
	case rep.noStack > 0:
		fmt.Fprintf(stderr, "trawl: %d of %d calls have no stack: they count under their function alone\n", rep.noStack, rep.calls)
	}
}
