// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"github.com/cilium/ebpf/btf"
)

// PacketBytes is the bytes of a packet captured from its network header:
// an IPv4 header with options and the ports after it, or an IPv6 header
// and the ports.
const PacketBytes = 64

// Packet is the start of the packet a struct sk_buff argument holds,
// from its network header, captured so that its addresses, protocol and
// ports can be shown (as pwru shows them).
type Packet struct {
	// Arg is the sk_buff argument.
	Arg int
	// Head and Network are the byte offsets of the sk_buff's head
	// pointer and network_header offset (a __u16, ~0 while unset).
	Head, Network int
}

// planPackets finds the sk_buff arguments whose captured bytes hold
// their head and network_header.
func planPackets(p *Plan) {
	for i, a := range p.Args {
		if a.Class != PtrStruct {
			continue
		}
		target, _ := pointee(a.Type)
		s, ok := target.(*btf.Struct)
		if !ok || s.Name != "sk_buff" {
			continue
		}
		head, ok1 := memberOffset(s, "head", 8)
		network, ok2 := memberOffset(s, "network_header", 2)
		if ok1 && ok2 && head+8 <= a.Budget && network+2 <= a.Budget {
			p.Packets = append(p.Packets, Packet{Arg: i, Head: head, Network: network})
		}
	}
}

// memberOffset returns the byte offset of member name of s, of size
// bytes, looking into anonymous structs and unions.
func memberOffset(t btf.Type, name string, size int) (int, bool) {
	members := membersOf(t)
	for _, m := range members {
		if m.BitfieldSize != 0 {
			continue
		}
		if m.Name == name {
			if n, err := btf.Sizeof(m.Type); err != nil || n != size {
				return 0, false
			}
			return int(m.Offset / 8), true
		}
		if m.Name == "" {
			if off, ok := memberOffset(m.Type, name, size); ok {
				return int(m.Offset/8) + off, true
			}
		}
	}
	return 0, false
}
