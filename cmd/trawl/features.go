// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/internal/kernel/features"
)

// runFeatures prints which attach mechanisms the running kernel supports
// and, given patterns, which backend auto would choose for them.
func runFeatures(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("features", flag.ContinueOnError)
	fs.SetOutput(stderr)
	markdown := fs.String("markdown", "", "print a Markdown table row for the kernel named `NAME`")
	header := fs.Bool("header", false, "with -markdown, print the table header first")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	r := features.Probe()
	if *markdown == "" {
		fmt.Fprint(stdout, r.String())
		if fs.NArg() == 0 {
			return nil
		}
		name, why, err := trawl.ChooseBackend(trawl.Config{Patterns: fs.Args(), Backend: trawl.BackendAuto})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "auto backend    %s: %s\n", name, why)
		return nil
	}
	if *header {
		fmt.Fprintln(stdout, strings.TrimSuffix(features.MarkdownHeader(), "\n"))
	}
	fmt.Fprintln(stdout, strings.TrimSuffix(r.Markdown(*markdown), "\n"))
	return nil
}
