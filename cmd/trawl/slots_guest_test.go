// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// udpSendArg as the first argument makes the test binary send one UDP
// datagram to 127.0.0.1:9 (discard) and exit.
const udpSendArg = "__udpsend"

// udpSend sends one datagram to 127.0.0.1:9.
func udpSend() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Sendto(fd, []byte("trawl"), 0, &syscall.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}})
}

// TestHighSlotArgument traces ip_make_skb, whose seventh argument (slot
// 6), struct ipcm_cookie *ipc, holds the datagram's destination: it must
// be read from its own slot, by trampolines and kprobes alike (on x86-64
// kprobes find it on the stack). A mask of the slot index once read slots
// 4-7 as 0-3.
func TestHighSlotArgument(t *testing.T) {
	guest.Require(t)
	for _, backend := range onePerFamily(t) {
		t.Run(backend, func(t *testing.T) {
			cmd := trawlCmd("--json", "-b", backend, "ip_make_skb", "--", os.Args[0], udpSendArg)
			stdout, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 && strings.Contains(stderr, "too many arguments") {
				// Some kernels' trampolines take fewer arguments than
				// ip_make_skb's nine (arm64-6.12's fentry).
				t.Skipf("%s cannot attach ip_make_skb here: %s", backend, strings.TrimSpace(stderr))
			}
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			var seen int
			for _, line := range strings.Split(stdout, "\n") {
				var call struct {
					Func string `json:"func"`
					Args struct {
						Ipc map[string]json.RawMessage `json:"ipc"`
					} `json:"args"`
				}
				if json.Unmarshal([]byte(line), &call) != nil || call.Func != "ip_make_skb" {
					continue
				}
				seen++
				// 127.0.0.1: a __be32, shown in host order, or as an
				// address.
				if addr := string(call.Args.Ipc["addr"]); addr != fmt.Sprint(0x7f000001) && addr != `"127.0.0.1"` {
					t.Errorf("ipc->addr %s, want 127.0.0.1: %s", addr, line)
				}
			}
			if seen == 0 {
				t.Fatalf("no call of ip_make_skb\n%s\n%s", stdout, stderr)
			}
		})
	}
}
