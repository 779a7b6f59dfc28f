// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"errors"
	"testing"
)

// FuzzFilter parses any text; what parses is compiled for real kernel
// functions, and what compiles must run to an exit of 0 or 1 on any call.
func FuzzFilter(f *testing.F) {
	for _, seed := range []string{
		"size > 1000 && sk->__sk_common.skc_family == AF_INET",
		`filename == "/etc/passwd" || filename ~ "/tmp/*"`,
		"!(ret < 0) | ret & 4",
		"skb->len > 1000 && reason == SKB_DROP_REASON_NO_SOCKET",
		"how->mode == 0640 && dfd == -100",
		"((size)) != -0x10 || (size > 3) == 1",
		`"x" == "y"`,
		"sk->",
		"ret",
	} {
		f.Add(seed, uint64(0x1000), uint64(5))
	}
	fx := loadFixture(f)
	plans := []string{"tcp_sendmsg", "sk_skb_reason_drop", "do_sys_openat2", "do_filp_open"}
	f.Fuzz(func(t *testing.T, src string, slot, ret uint64) {
		e, err := Parse(src)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || fe.Pos < 0 || fe.Pos > len(src) {
				t.Fatalf("%q: error %v without a position in the source", src, err)
			}
			return
		}
		for _, name := range plans {
			body, err := Compile(e, fx.plan(t, name), fx.consts)
			if err != nil {
				var fe *Error
				if !errors.As(err, &fe) {
					t.Fatalf("%q on %s: error %v is not a *Error", src, name, err)
				}
				continue
			}
			prog, err := Program([]Func{{ID: 1, Body: body}})
			if err != nil {
				t.Fatal(err)
			}
			c := call{
				slots:  map[int]uint64{0: slot, 1: slot, 2: slot},
				ret:    ret,
				kernel: map[uint64][]byte{0x1000: make([]byte, 4096)},
				user:   map[uint64][]byte{0x1000: []byte("/tmp/x\x00")},
			}
			r0, err := run(prog, 1, c)
			if err != nil || r0 > 1 {
				t.Fatalf("%q on %s: r0 %d, %v\n%v", src, name, r0, err, prog)
			}
		}
	})
}
