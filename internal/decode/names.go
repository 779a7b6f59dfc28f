// SPDX-License-Identifier: Apache-2.0

package decode

import (
	"strconv"
	"sync"
	"syscall"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/trawl-dev/trawl/call"
)

// viewField is a member of a well-known struct's view.
type viewField struct {
	field
	label string
	names func(uint64) string // if set, integers are shown by their names
}

type viewSpec struct {
	label, path string
	names       func(uint64) string
}

// named names integers by m.
func named(m map[uint64]string) func(uint64) string {
	return func(x uint64) string { return m[x] }
}

// shortViews are the views that stand for their structs' members at the
// default depth only: a deeper one (--depth), which may capture the
// structs their members point to, shows the generic pick.
var shortViews = map[string]bool{"file": true, "task_struct": true, "dentry": true, "inode": true, "net_device": true}

// shortForms make the one string a struct reads as from its view's
// members, by their labels: "" when they were not captured. Text shows
// it in place of the members, JSON beside them.
var shortForms = map[string]func(m map[string]*call.Value) string{
	// comm[pid], as ps and ftrace name a task.
	"task_struct": func(m map[string]*call.Value) string {
		comm, pid := m["comm"], m["pid"]
		if comm == nil || pid == nil || comm.Kind != call.KindString || pid.Kind != call.KindInt {
			return ""
		}
		return comm.Str + "[" + strconv.FormatInt(pid.Int(), 10) + "]"
	},
	"dentry":     nameOf,
	"net_device": nameOf,
}

// nameOf is the short form of a struct named by a string, its "name".
func nameOf(m map[string]*call.Value) string {
	if n := m["name"]; n != nil && n.Kind == call.KindString {
		return n.Str
	}
	return ""
}

// ViewMembers returns the dotted paths of the members the view of the
// struct named name shows at Options.Depth depth, nil if it shows none:
// a capture plan makes sure they are captured.
func ViewMembers(name string, depth int) []string {
	if shortViews[name] && depth > DefaultDepth {
		return nil
	}
	var out []string
	for _, spec := range views[name] {
		out = append(out, spec.path)
	}
	return out
}

// views are the most telling members of well-known kernel structs, shown
// instead of the generic pick. Paths that a kernel lacks are skipped.
var views = map[string][]viewSpec{
	"sock": {
		{"family", "__sk_common.skc_family", named(addressFamilies)},
		{"sport", "__sk_common.skc_num", nil},
		{"dport", "__sk_common.skc_dport", nil}, // __be16: shown in host order
		{"state", "__sk_common.skc_state", named(tcpStates)},
	},
	"sock_common": {
		{"family", "skc_family", named(addressFamilies)},
		{"sport", "skc_num", nil},
		{"dport", "skc_dport", nil},
		{"state", "skc_state", named(tcpStates)},
	},
	// A file's path comes first (withPath); f_op names its filesystem.
	"file": {
		{"f_mode", "f_mode", nil},
		{"f_op", "f_op", nil},
		{"f_flags", "f_flags", nil},
		{"f_pos", "f_pos", nil},
	},
	"sk_buff": {
		{"len", "len", nil},
		{"data_len", "data_len", nil},
		{"protocol", "protocol", named(ethProtocols)},
		{"mark", "mark", nil},
		{"skb_iif", "skb_iif", nil},
	},
	// The views below read as one string, their short form.
	"task_struct": {
		{"comm", "comm", nil},
		{"pid", "pid", nil},
	},
	"dentry": {
		{"name", "d_name.name", nil},
	},
	"inode": {
		{"ino", "i_ino", nil},
		{"mode", "i_mode", fileMode},
	},
	"net_device": {
		{"name", "name", nil},
		{"ifindex", "ifindex", nil},
	},
}

// fileTypes are the file types of a mode's S_IFMT bits.
var fileTypes = map[uint64]string{
	0o140000: "S_IFSOCK", 0o120000: "S_IFLNK", 0o100000: "S_IFREG", 0o060000: "S_IFBLK",
	0o040000: "S_IFDIR", 0o020000: "S_IFCHR", 0o010000: "S_IFIFO",
}

// fileMode names a file's mode as strace does: its type and its
// permissions in octal, "S_IFREG|0644".
func fileMode(x uint64) string {
	perm := "0" + strconv.FormatUint(x&0o7777, 8)
	if t, ok := fileTypes[x&0o170000]; ok {
		return t + "|" + perm
	}
	return perm
}

// viewOf returns the view of struct s, nil if it has none.
func viewOf(s *btf.Struct) []viewField {
	specs, ok := views[s.Name]
	if !ok {
		return nil
	}
	var out []viewField
	for _, spec := range specs {
		if f, ok := lookup(s, spec.path); ok {
			out = append(out, viewField{field: f, label: spec.label, names: spec.names})
		}
	}
	return out
}

var addressFamilies = map[uint64]string{
	0: "AF_UNSPEC", 1: "AF_UNIX", 2: "AF_INET", 10: "AF_INET6", 16: "AF_NETLINK",
	17: "AF_PACKET", 38: "AF_ALG", 40: "AF_VSOCK", 44: "AF_XDP", 45: "AF_MCTP",
}

// tcpStates are the states of include/net/tcp_states.h.
var tcpStates = map[uint64]string{
	1: "TCP_ESTABLISHED", 2: "TCP_SYN_SENT", 3: "TCP_SYN_RECV", 4: "TCP_FIN_WAIT1",
	5: "TCP_FIN_WAIT2", 6: "TCP_TIME_WAIT", 7: "TCP_CLOSE", 8: "TCP_CLOSE_WAIT",
	9: "TCP_LAST_ACK", 10: "TCP_LISTEN", 11: "TCP_CLOSING", 12: "TCP_NEW_SYN_RECV",
	13: "TCP_BOUND_INACTIVE",
}

var ethProtocols = map[uint64]string{
	0x0800: "ETH_P_IP", 0x0806: "ETH_P_ARP", 0x8100: "ETH_P_8021Q", 0x86dd: "ETH_P_IPV6",
	0x88a8: "ETH_P_8021AD", 0x8847: "ETH_P_MPLS_UC", 0x0003: "ETH_P_ALL",
}

// kernelErrnos are error numbers internal to the kernel (include/linux/errno.h)
// that functions return but user space never sees.
var kernelErrnos = map[int64]string{
	512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND",
	515: "ENOIOCTLCMD", 516: "ERESTART_RESTARTBLOCK", 517: "EPROBE_DEFER",
	518: "EOPENSTALE", 519: "ENOPARAM", 521: "EBADHANDLE", 522: "ENOTSYNC",
	523: "EBADCOOKIE", 524: "ENOTSUPP", 525: "ETOOSMALL", 526: "ESERVERFAULT",
	527: "EBADTYPE", 528: "EJUKEBOX", 529: "EIOCBQUEUED", 530: "ERECALLCONFLICT",
	531: "ENOGRACE",
}

// ErrnoName returns the name of a positive error number, such as "ENOENT",
// including the kernel's internal ones, or "" if it has none.
func ErrnoName(n int64) string {
	if name, ok := kernelErrnos[n]; ok {
		return name
	}
	if n <= 0 || n > maxErrno {
		return ""
	}
	return unix.ErrnoName(syscall.Errno(n))
}

// errnoNumbers maps the name of each error number ErrnoName names back to
// the number.
var errnoNumbers = sync.OnceValue(func() map[string]int64 {
	m := map[string]int64{}
	for n := int64(maxErrno); n > 0; n-- {
		// Down from the top, so that a name two numbers share (EWOULDBLOCK
		// and EAGAIN are one) maps to the smaller.
		if name := ErrnoName(n); name != "" {
			m[name] = n
		}
	}
	return m
})

// ErrnoNumber returns the positive error number of a name such as
// "ENOENT", including the kernel's internal ones.
func ErrnoNumber(name string) (int64, bool) {
	n, ok := errnoNumbers()[name]
	return n, ok
}

// ErrnoNames returns every name ErrnoNumber knows, with its number.
func ErrnoNames() map[string]int64 { return errnoNumbers() }
