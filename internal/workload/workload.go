// SPDX-License-Identifier: Apache-2.0

// Package workload is trawl's small test workload: a few system calls with
// visible arguments (a file written, read and stat'ed, a pipe, a loopback
// TCP exchange). `trawl --workload` traces it in the demo, trawl-bench
// times it under tracers, and the test bed runs its loopback exchange.
package workload

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
)

// Summary says what one loop of the workload does.
const Summary = "wrote, read and stat'ed a file, used a pipe and a loopback TCP connection"

// Run runs loops loops of the workload in a fresh temporary directory,
// removed at the end, and stops early when ctx is done.
func Run(ctx context.Context, loops int) error {
	dir, err := os.MkdirTemp("", "trawl-workload-")
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	defer os.RemoveAll(dir)
	for range loops {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := once(dir); err != nil {
			return fmt.Errorf("workload: %w", err)
		}
	}
	return nil
}

// once runs one loop of the workload in dir.
func once(dir string) error {
	path := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(path, []byte("hello from trawl\n"), 0o640); err != nil {
		return err
	}
	if _, err := os.ReadFile(path); err != nil {
		return err
	}
	os.Stat(filepath.Join(dir, "missing"))
	if err := pipe(); err != nil {
		return err
	}
	return Loopback()
}

// pipe writes a few bytes into a pipe and reads them back.
func pipe() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	w.Write([]byte("ping"))
	r.Read(make([]byte, 4))
	r.Close()
	w.Close()
	return nil
}

// Loopback sends a few bytes to an echo server over a loopback TCP
// connection and checks that they come back.
func Loopback() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		return err
	}
	echo := make([]byte, 5)
	if _, err := io.ReadFull(c, echo); err != nil {
		return err
	}
	if string(echo) != "hello" {
		return fmt.Errorf("the loopback echo returned %q, want %q", echo, "hello")
	}
	return nil
}
