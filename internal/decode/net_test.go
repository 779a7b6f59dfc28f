// SPDX-License-Identifier: Apache-2.0

package decode

import "testing"

func TestFiveTuple(t *testing.T) {
	v4 := func(proto byte, rest ...byte) []byte {
		return append([]byte{0x45, 0, 0, 40, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}, rest...)
	}
	v6 := make([]byte, 44)
	v6[0], v6[6], v6[23], v6[39] = 0x60, 17, 1, 2
	copy(v6[40:], []byte{0x30, 0x39, 0, 53})
	for _, tc := range []struct {
		name     string
		eth      uint16
		pkt      []byte
		src, dst string
		proto    uint8
		ok       bool
	}{
		{"IPv4 TCP", 0x0800, v4(6, 0x01, 0xbb, 0x1f, 0x90), "10.0.0.1:443", "10.0.0.2:8080", 6, true},
		{"IPv4 ICMP: no ports", 0x0800, v4(1, 8, 0, 0, 0), "10.0.0.1", "10.0.0.2", 1, true},
		{"IPv4 UDP cut before the ports", 0x0800, v4(17, 0, 53), "10.0.0.1", "10.0.0.2", 17, true},
		{"IPv6 UDP", 0x86dd, v6, "[::1]:12345", "[::2]:53", 17, true},
		{"the protocol says IPv6, the header IPv4", 0x86dd, v4(6, 0, 1, 0, 2), "", "", 0, false},
		{"ARP", 0x0806, v4(6), "", "", 0, false},
		{"short", 0x0800, v4(6)[:19], "", "", 0, false},
	} {
		src, dst, proto, ok := fiveTuple(tc.eth, tc.pkt)
		if ok != tc.ok || src.Str != tc.src || dst.Str != tc.dst || proto != tc.proto {
			t.Errorf("%s: %q %q %d %v, want %q %q %d %v", tc.name, src.Str, dst.Str, proto, ok, tc.src, tc.dst, tc.proto, tc.ok)
		}
	}
}
