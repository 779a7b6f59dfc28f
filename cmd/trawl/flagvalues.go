// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-dev/trawl"
)

// pidList is the value of the repeatable -p flag: process ids, each
// value one or a comma-separated list of them.
type pidList []int

func (p *pidList) Set(s string) error {
	for field := range strings.SplitSeq(s, ",") {
		pid, err := parsePID(strings.TrimSpace(field))
		if err != nil {
			return err
		}
		*p = append(*p, pid)
	}
	return nil
}

func (p *pidList) String() string {
	s := make([]string, len(*p))
	for i, pid := range *p {
		s[i] = strconv.Itoa(pid)
	}
	return strings.Join(s, ",")
}

func (p *pidList) Type() string { return "PID" }

// commName is the value of --comm: one task name, as the kernel filters
// on one; a list, or a second --comm, is refused rather than half taken.
type commName string

func (c *commName) Set(s string) error {
	switch {
	case *c != "":
		return fmt.Errorf("--comm takes one name, and %q was given already", string(*c))
	case strings.Contains(s, ","):
		return errors.New("--comm takes one name, not a list")
	}
	*c = commName(s)
	return nil
}

func (c *commName) String() string { return string(*c) }

func (c *commName) Type() string { return "NAME" }

// durationOrSeconds is the value of --duration: a Go duration (10s,
// 1m30s, 500ms) or, as timeout(1) takes it, a number of seconds (5, 2.5).
type durationOrSeconds time.Duration

var errDuration = errors.New("want a duration such as 10s, 1m30s or 500ms, or a number of seconds")

func (d *durationOrSeconds) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil && s != "" && strings.Trim(s, "0123456789.") == "" {
		v, err = time.ParseDuration(s + "s")
	}
	if err != nil {
		return errDuration
	}
	*d = durationOrSeconds(v)
	return nil
}

// String writes the duration as Go does, but 0 as "0", which flag help
// takes for no default.
func (d *durationOrSeconds) String() string {
	if *d == 0 {
		return "0"
	}
	return time.Duration(*d).String()
}

func (d *durationOrSeconds) Type() string { return "duration" }

// bufferList is the value of the repeatable --buf flag.
type bufferList []trawl.Buffer

func (l *bufferList) Set(s string) error {
	b, err := trawl.ParseBuffer(s)
	if err != nil {
		return err
	}
	*l = append(*l, b)
	return nil
}

func (l *bufferList) String() string {
	s := make([]string, len(*l))
	for i, b := range *l {
		s[i] = b.Func + ":" + b.Arg + "=" + b.SizeArg
	}
	return strings.Join(s, ",")
}

func (l *bufferList) Type() string { return "FUNC:ARG=SIZEARG" }

// byteSize is a size in bytes, written with an optional K, M or G suffix
// (KiB, MiB, GiB: powers of 1024).
type byteSize int

// sizeUnits are the suffixes of byteSize, largest first, with their shifts.
var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"G", 30}, {"M", 20}, {"K", 10}}

var errSize = errors.New("want a number of bytes, with K, M or G for KiB, MiB or GiB (e.g. 64M)")

func (b *byteSize) Set(s string) error {
	num, shift := strings.ToUpper(s), uint(0)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(strings.TrimSuffix(num, "IB"), u.suffix); ok {
			num, shift = rest, u.shift
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil {
		return errSize
	}
	*b = byteSize(n << shift)
	return nil
}

// String writes the size with the largest suffix that divides it.
func (b *byteSize) String() string {
	for _, u := range sizeUnits {
		if n := int(*b); n != 0 && n%(1<<u.shift) == 0 {
			return strconv.Itoa(n>>u.shift) + u.suffix
		}
	}
	return strconv.Itoa(int(*b))
}

func (b *byteSize) Type() string { return "SIZE" }

// stackKind is the value of --stack: which stacks each call shows.
type stackKind string

// The values of --stack; --stack alone means stackBoth.
const (
	stackKernel = "kernel"
	stackUser   = "user"
	stackBoth   = "both"
)

func (k *stackKind) Set(s string) error {
	switch s {
	case stackKernel, stackUser, stackBoth:
		*k = stackKind(s)
		return nil
	}
	return fmt.Errorf("want %s, %s or %s", stackKernel, stackUser, stackBoth)
}

func (k *stackKind) String() string { return string(*k) }

func (k *stackKind) Type() string { return "WHICH" }

func (k stackKind) kernel() bool { return k == stackKernel || k == stackBoth }

func (k stackKind) user() bool { return k == stackUser || k == stackBoth }
