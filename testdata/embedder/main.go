// SPDX-License-Identifier: Apache-2.0

// Command embedder uses trawl as a module outside it would, through its
// public API only: it traces the functions its arguments name, counts the
// calls that return an error by function, and writes every call as JSON.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s, err := trawl.Open(ctx, trawl.Config{
		Patterns: os.Args[1:],
		Capture:  trawl.CaptureOptions{StringBytes: 64},
		Decode:   trawl.DecodeOptions{Depth: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "tracing %d functions with %s\n", len(s.Selection().Selected), s.Backend)
	defer s.Close()
	r := render.NewJSON(os.Stdout, render.Options{})
	failed := map[string]int{}
	var c trawl.Call
	for {
		err := s.Read(ctx, &c)
		if errors.Is(err, context.Canceled) {
			break // interrupted
		}
		if err != nil {
			log.Fatal(err)
		}
		if isError(c.Ret) {
			failed[c.Func]++
		}
		if err := r.Call(&c); err != nil {
			log.Fatal(err)
		}
	}
	s.Stop()
	r.Close()
	for fn, n := range failed {
		fmt.Fprintf(os.Stderr, "%s: %d errors\n", fn, n)
	}
	st, _ := s.Stats()
	for _, line := range st.Skipped.Summary(1) {
		fmt.Fprintln(os.Stderr, "skipped", line)
	}
}

// isError reports whether a return value is an error.
func isError(v trawl.Value) bool {
	switch v.Kind {
	case call.KindErrno:
		return true
	case call.KindPointer:
		return v.Uint() == 0
	}
	return false
}
