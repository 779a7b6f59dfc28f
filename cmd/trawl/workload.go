// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
)

// workloadCommand is the hidden subcommand that --workload runs.
const workloadCommand = "__workload"

// runWorkload makes a few system calls with visible arguments: files,
// a pipe and a loopback TCP exchange.
func runWorkload(_ context.Context, _ []string, stdout, _ io.Writer) error {
	dir, err := os.MkdirTemp("", "trawl-workload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(path, []byte("hello from trawl\n"), 0o640); err != nil {
		return err
	}
	if _, err := os.ReadFile(path); err != nil {
		return err
	}
	os.Stat(filepath.Join(dir, "missing"))
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	w.Write([]byte("ping"))
	buf := make([]byte, 4)
	r.Read(buf)
	r.Close()
	w.Close()

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
	if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "workload: wrote, read and stat'ed a file, used a pipe and a loopback TCP connection")
	return nil
}
