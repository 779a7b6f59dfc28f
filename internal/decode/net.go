// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"encoding/binary"
	"net/netip"

	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/call"
)

// Address families of the socket addresses decoded as text.
const (
	afInet  = 2
	afInet6 = 10
)

// sockaddrs are the socket address structs shown as "10.0.0.1:443" or
// "[::1]:443" when their family is AF_INET or AF_INET6 (their layout is
// the ABI's: family, port in network order, then the address).
var sockaddrs = map[string]bool{"sockaddr": true, "sockaddr_unsized": true, "sockaddr_in": true, "sockaddr_in6": true, "sockaddr_storage": true, "__kernel_sockaddr_storage": true}

// sockaddr decodes a socket address of struct t from raw, if it is one of
// an internet family and raw holds it.
func sockaddr(t btf.Type, raw []byte) (call.Value, bool) {
	s, ok := t.(*btf.Struct)
	if !ok || !sockaddrs[s.Name] || len(raw) < 8 {
		return call.Value{}, false
	}
	port := binary.BigEndian.Uint16(raw[2:])
	switch binary.LittleEndian.Uint16(raw) {
	case afInet:
		return addrPort(netip.AddrFrom4([4]byte(raw[4:8])), port), true
	case afInet6:
		if len(raw) < 24 {
			return call.Value{}, false
		}
		return addrPort(netip.AddrFrom16([16]byte(raw[8:24])), port), true
	}
	return call.Value{}, false
}

func addrPort(a netip.Addr, port uint16) call.Value {
	return call.Value{Kind: call.KindString, Str: netip.AddrPortFrom(a.Unmap(), port).String()}
}

// sockView finds the addresses and ports of a struct sock or
// sock_common, shown as src and dst ("10.0.0.1:443") after its family.
type sockView struct {
	family, saddr, daddr, saddr6, daddr6, sport, dport field
}

// sockPaths are the paths of sockView's fields, in struct sock_common.
var sockPaths = [...]string{"skc_family", "skc_rcv_saddr", "skc_daddr", "skc_v6_rcv_saddr", "skc_v6_daddr", "skc_num", "skc_dport"}

// sockViewOf returns the sockView of a struct sock or sock_common, nil for
// other types or a kernel without IPv6 in its sockets.
func sockViewOf(s *btf.Struct) *sockView {
	prefix := ""
	switch s.Name {
	case "sock":
		prefix = "__sk_common."
	case "sock_common":
	default:
		return nil
	}
	var v sockView
	for i, f := range []*field{&v.family, &v.saddr, &v.daddr, &v.saddr6, &v.daddr6, &v.sport, &v.dport} {
		var ok bool
		if *f, ok = lookup(s, prefix+sockPaths[i]); !ok {
			return nil
		}
	}
	return &v
}

// bytesIn returns the bytes of f in raw, if they were captured.
func (f *field) bytesIn(raw []byte) ([]byte, bool) {
	start, end := int(f.off/8), int(f.off/8+f.size)
	if f.bits != 0 || end > len(raw) {
		return nil, false
	}
	return raw[start:end], true
}

// addrs returns the src and dst of the socket in raw, if it is an
// internet socket whose addresses were captured.
func (v *sockView) addrs(raw []byte) (src, dst call.Value, ok bool) {
	fam, ok1 := v.family.bytesIn(raw)
	sport, ok2 := v.sport.bytesIn(raw)
	dport, ok3 := v.dport.bytesIn(raw)
	if !ok1 || !ok2 || !ok3 || len(fam) != 2 || len(sport) != 2 || len(dport) != 2 {
		return src, dst, false
	}
	var s, d field
	switch binary.LittleEndian.Uint16(fam) {
	case afInet:
		s, d = v.saddr, v.daddr
	case afInet6:
		s, d = v.saddr6, v.daddr6
	default:
		return src, dst, false
	}
	sb, ok1 := s.bytesIn(raw)
	db, ok2 := d.bytesIn(raw)
	if !ok1 || !ok2 {
		return src, dst, false
	}
	addr := func(b []byte) netip.Addr { a, _ := netip.AddrFromSlice(b); return a }
	src = addrPort(addr(sb), binary.LittleEndian.Uint16(sport)) // skc_num: host order
	dst = addrPort(addr(db), binary.BigEndian.Uint16(dport))    // skc_dport: network order
	src.Name, dst.Name = "src", "dst"
	return src, dst, true
}

// withAddrs inserts src and dst after the first field (the family) of a
// socket's view.
func (v *sockView) withAddrs(out *call.Value, raw []byte) {
	src, dst, ok := v.addrs(raw)
	if !ok || len(out.Fields) == 0 {
		return
	}
	fields := make([]call.Value, 0, len(out.Fields)+2)
	fields = append(fields, out.Fields[0], src, dst)
	out.Fields = append(fields, out.Fields[1:]...)
}

// skbView finds the packet of a struct sk_buff: the capture program
// copies it from its network header when it can (plan.Packet), and the
// decoder is told it as the pointee of the head pointer.
type skbView struct {
	head, protocol field
}

func skbViewOf(s *btf.Struct) *skbView {
	if s.Name != "sk_buff" {
		return nil
	}
	var v skbView
	var ok1, ok2 bool
	v.head, ok1 = lookup(s, "head")
	v.protocol, ok2 = lookup(s, "protocol")
	if !ok1 || !ok2 {
		return nil
	}
	return &v
}

// ipProtocols name the transport protocols of IP headers.
var ipProtocols = map[uint64]string{1: "ICMP", 6: "TCP", 17: "UDP", 58: "ICMPv6", 132: "SCTP"}

// withTuple puts the packet's src and dst ("10.0.0.1:443", the address
// alone for protocols without ports) and proto first in an sk_buff's
// members, when its packet was captured and is of the IP version its
// protocol says.
func (v *skbView) withTuple(out *call.Value, raw []byte, pointees map[*byte]Pointee) {
	head, ok1 := v.head.bytesIn(raw)
	proto, ok2 := v.protocol.bytesIn(raw)
	if !ok1 || !ok2 || len(proto) != 2 {
		return
	}
	pt, ok := pointees[&head[0]]
	if !ok || !pt.Packet {
		return
	}
	src, dst, l4, ok := fiveTuple(binary.BigEndian.Uint16(proto), pt.Data)
	if !ok {
		return
	}
	src.Name, dst.Name = "src", "dst"
	p := call.Value{Kind: call.KindEnum, Name: "proto", Bits: uint64(l4), Str: ipProtocols[uint64(l4)]}
	out.Fields = append([]call.Value{src, dst, p}, out.Fields...)
}

// fiveTuple reads the addresses, ports and transport protocol of an IP
// packet b of Ethernet protocol ethProto (ETH_P_IP or ETH_P_IPV6).
func fiveTuple(ethProto uint16, b []byte) (src, dst call.Value, l4 uint8, ok bool) {
	var sa, da netip.Addr
	hdr := 0
	switch {
	case ethProto == 0x0800 && len(b) >= 20 && b[0]>>4 == 4:
		hdr, l4 = int(b[0]&15)*4, b[9]
		sa, da = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
	case ethProto == 0x86dd && len(b) >= 40 && b[0]>>4 == 6:
		hdr, l4 = 40, b[6]
		sa, da = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
	default:
		return src, dst, 0, false
	}
	if (l4 == 6 || l4 == 17 || l4 == 132) && hdr >= 20 && len(b) >= hdr+4 {
		return addrPort(sa, binary.BigEndian.Uint16(b[hdr:])), addrPort(da, binary.BigEndian.Uint16(b[hdr+2:])), l4, true
	}
	return call.Value{Kind: call.KindString, Str: sa.String()}, call.Value{Kind: call.KindString, Str: da.String()}, l4, true
}
