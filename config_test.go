// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/plan"
)

// TestValidate checks that every rule of Validate refuses what it should,
// with an error that matches ErrBadConfig and says what is wrong, and
// that the zero values of the options (the defaults) pass.
func TestValidate(t *testing.T) {
	ok := Config{Patterns: []string{"vfs_*", "/^tcp_(send|recv)msg$/", "!vfs_readv", "ext4:*(struct file *)"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	full := ok
	full.Entries, full.Errors, full.Errnos = []string{"do_sys_openat2"}, true, []syscall.Errno{syscall.ENOENT}
	full.Filter, full.Show = "ret < 0", []string{"file->f_path.dentry->d_name.name"}
	full.Capture = CaptureOptions{StructBytes: MaxBytes, StringBytes: 1, BufferBytes: MaxBytes, Depth: MaxDepth - 1, CallBytes: MaxCallBytes, Buffers: []Buffer{{"f", "buf", "len"}}}
	full.Decode = DecodeOptions{Depth: MaxDepth, MaxBytes: MaxBytes}
	full.RingBufferSize, full.Backend, full.Comm = 1<<20, BackendKprobeMulti, "fifteen-chars.."
	full.CatalogueCache = "/var/cache/trawl"
	full.BTF, full.BTFDir = "internal/kernel/testdata/vmlinux.elf", "internal/kernel/testdata"
	if err := full.Validate(); err != nil {
		t.Fatalf("a config at its limits: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no pattern", func(c *Config) { c.Patterns = nil }, "no pattern"},
		{"bad glob", func(c *Config) { c.Patterns = []string{"tcp_[x"} }, "malformed"},
		{"bad regexp", func(c *Config) { c.Patterns = []string{"/tcp_(/"} }, "bad pattern"},
		{"bad entry", func(c *Config) { c.Entries = []string{"a b"} }, "cannot contain spaces"},
		{"unknown backend", func(c *Config) { c.Backend = "ebpf" }, `--backend "ebpf"`},
		{"btf missing", func(c *Config) { c.BTF = "testdata/no-such-btf" }, "--btf testdata/no-such-btf: read BTF"},
		{"btf not BTF", func(c *Config) { c.BTF = "config.go" }, "neither raw BTF nor an ELF file"},
		{"btf-dir alone", func(c *Config) { c.BTFDir = "testdata" }, "--btf-dir needs --btf"},
		{"pid zero", func(c *Config) { c.PIDs = []int{0} }, "out of range"},
		{"comm too long", func(c *Config) { c.Comm = "sixteen-chars..." }, "longer than the kernel's 15"},
		{"cgroup-exact alone", func(c *Config) { c.CgroupExact = true }, "--cgroup-exact goes with --cgroup"},
		{"negative min duration", func(c *Config) { c.MinDuration = -time.Second }, "--min-duration cannot be negative"},
		{"errno without errors", func(c *Config) { c.Errnos = []syscall.Errno{syscall.EIO} }, "--errno needs --errors"},
		{"errnos both ways", func(c *Config) {
			c.Errors, c.Errnos, c.ExceptErrnos = true, []syscall.Errno{syscall.EIO}, []syscall.Errno{syscall.EAGAIN}
		}, "not both"},
		{"bad filter", func(c *Config) { c.Filter = "skb->" }, "--filter"},
		{"bad show", func(c *Config) { c.Show = []string{"x->"} }, "--show"},
		{"too many shows", func(c *Config) { c.Show = strings.Fields("a b c d e f g h i") }, "at most 8"},
		{"capture depth", func(c *Config) { c.Capture.Depth = MaxDepth }, "--depth must be 1 to 16"},
		{"decode depth", func(c *Config) { c.Decode.Depth = MaxDepth + 1 }, "--depth must be 1 to 16"},
		{"call bytes", func(c *Config) { c.Capture.CallBytes = MaxCallBytes + 1 }, "--call-bytes"},
		{"buffer bytes", func(c *Config) { c.Capture.BufferBytes = MaxBytes + 1 }, "--max-bytes"},
		{"decode bytes", func(c *Config) { c.Decode.MaxBytes = -1 }, "--max-bytes"},
		{"half a buffer", func(c *Config) { c.Capture.Buffers = []Buffer{{Func: "f", Arg: "buf"}} }, "FUNC:ARG=SIZEARG"},
		{"ring buffer", func(c *Config) { c.RingBufferSize = 12345 }, "power of two"},
		{"track timeout alone", func(c *Config) { c.TrackTimeout = time.Second }, "need --track"},
		{"negative track objects", func(c *Config) { c.Track, c.TrackObjects = "skb", -1 }, "cannot be negative"},
		{"track and stats", func(c *Config) { c.Track, c.Aggregate = "skb", true }, "cannot go with --stats"},
		{"stack counts without stacks", func(c *Config) { c.Aggregate, c.StackCounts = true, 10 }, "--stack-counts needs --stats and --stack"},
		{"stack counts without stats", func(c *Config) { c.Stack, c.StackCounts = true, 10 }, "--stack-counts needs --stats and --stack"},
		{"negative stack counts", func(c *Config) { c.Aggregate, c.UserStack, c.StackCounts = true, true, -1 }, "--stack-counts cannot be negative"},
		{"track and chains", func(c *Config) { c.Track, c.Entries, c.Errors = "skb", []string{"f"}, true }, "--entry and --errors"},
		{"relative cache", func(c *Config) { c.CatalogueCache = "run/trawl" }, "not an absolute path"},
		{"cache and no cache", func(c *Config) { c.CatalogueCache, c.NoCache = "/run/trawl", true }, "--no-cache cannot go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.change(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want ErrBadConfig saying %q", err, tc.want)
			}
		})
	}
	for _, p := range []string{"", "tcp_[x"} {
		cfg := Config{Patterns: []string{p}}
		if p == "" {
			cfg.Patterns = nil
		}
		if err := cfg.Validate(); !errors.Is(err, ErrBadPattern) {
			t.Errorf("patterns %q: %v, want ErrBadPattern too", cfg.Patterns, err)
		}
	}
}

// TestLimits checks the limits a Config states are the planner's.
func TestLimits(t *testing.T) {
	if MaxCallBytes != plan.DefaultCallBudget {
		t.Errorf("MaxCallBytes %d, the planner's call budget %d", MaxCallBytes, plan.DefaultCallBudget)
	}
	if MaxBytes != int(bpf.CaptureLimitMAX_CAP) {
		t.Errorf("MaxBytes %d, the capture program's MAX_CAP %d", MaxBytes, bpf.CaptureLimitMAX_CAP)
	}
}
