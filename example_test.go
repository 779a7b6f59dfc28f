// SPDX-License-Identifier: Apache-2.0

package trawl_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/trawl-dev/trawl"
	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

// Trace the vfs_read and vfs_write calls of this process, print the first
// ten and how many were lost. Tracing needs root, or CAP_BPF and
// CAP_PERFMON.
func ExampleOpen() {
	s, err := trawl.Open(context.Background(), trawl.Config{
		Patterns: []string{"vfs_read", "vfs_write"},
		PIDs:     []int{os.Getpid()},
	})
	if errors.Is(err, trawl.ErrNoPrivileges) {
		log.Fatalf("run as root: %v", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Printf("tracing %d functions with %s\n", len(s.Selection().Selected), s.Backend)
	var c trawl.Call
	for range 10 {
		if err := s.Read(context.Background(), &c); err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.Func, c.Comm, c.Duration)
	}
	s.Stop()
	st, _ := s.Stats()
	fmt.Printf("%d calls, %d dropped\n", st.Calls, st.Drops)
}

// Read calls and look at their values by kind: here, the calls that
// return an error, with the name of the first argument.
func ExampleSession_Read() {
	s, err := trawl.Open(context.Background(), trawl.Config{Patterns: []string{"do_sys_openat2"}})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var c trawl.Call
	for {
		err := s.Read(context.Background(), &c)
		if errors.Is(err, trawl.ErrClosed) {
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		if c.Ret.Kind != call.KindErrno {
			continue
		}
		fmt.Printf("%s failed with %s", c.Func, c.Ret.Str)
		for _, a := range c.Args {
			switch a.Kind {
			case call.KindString:
				fmt.Printf(" %s=%q", a.Name, a.Str)
			case call.KindInt:
				fmt.Printf(" %s=%d", a.Name, a.Int())
			}
		}
		fmt.Println()
	}
}

// Write calls as JSON lines, one object a call.
func ExampleSession_Read_json() {
	s, err := trawl.Open(context.Background(), trawl.Config{Patterns: []string{"tcp_v4_connect"}})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	r := render.NewJSON(os.Stdout, render.Options{})
	defer r.Close()
	var c trawl.Call
	for s.Read(context.Background(), &c) == nil {
		if err := r.Call(&c); err != nil {
			log.Fatal(err)
		}
	}
}

// List the functions a pattern selects, and their prototypes, without
// tracing them.
func ExampleList() {
	sel, err := trawl.List([]string{"tcp_v4_*"}, trawl.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, fn := range sel.Selected {
		fmt.Println(fn.Prototype)
	}
}

// Count every call of the vfs functions in the kernel for five seconds,
// then print each function's calls, errors by errno and median latency:
// nothing goes through the ring buffer, so nothing is dropped.
func ExampleSession_FunctionStats() {
	s, err := trawl.Open(context.Background(), trawl.Config{Patterns: []string{"vfs_*"}, Aggregate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	time.Sleep(5 * time.Second)
	fs, err := s.FunctionStats()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range fs {
		fmt.Printf("%s: %d calls, %d errors %v, median %v\n", f.Func, f.Calls, f.Errors, f.Errnos, time.Duration(f.Latency.Quantile(0.5)))
	}
}
