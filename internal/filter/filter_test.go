// SPDX-License-Identifier: Apache-2.0

package filter

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/trawl-dev/trawl/internal/bpf"
	"github.com/trawl-dev/trawl/internal/decode/decodetest"
	"github.com/trawl-dev/trawl/internal/kernel"
	"github.com/trawl-dev/trawl/internal/plan"
)

// fixture is the BTF of a real kernel (a few functions and their types).
type fixture struct {
	spec   *btf.Spec
	consts Constants
}

func loadFixture(t testing.TB) *fixture {
	spec, err := decodetest.Spec()
	if err != nil {
		t.Fatal(err)
	}
	consts, err := KernelConstants(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{spec, consts}
}

func (fx *fixture) plan(t testing.TB, name string) *plan.Plan {
	var fn *btf.Func
	if err := fx.spec.TypeByName(name, &fn); err != nil {
		t.Fatal(err)
	}
	return planOf(t, fn)
}

func planOf(t testing.TB, fn *btf.Func) *plan.Plan {
	p, err := plan.New(kernel.FunctionOf(fn), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// call is a traced call as the filter sees it.
type call struct {
	slots  map[int]uint64
	ret    uint64
	kernel map[uint64][]byte
	user   map[uint64][]byte
}

const recordSize = int(unsafe.Sizeof(bpf.CaptureRecord{}))

// eval compiles src for p and runs it on c as function 7.
func eval(t *testing.T, fx *fixture, p *plan.Plan, src string, c call) bool {
	t.Helper()
	e, err := Parse(src)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	body, err := Compile(e, p, fx.consts)
	if err != nil {
		t.Fatalf("compile %q for %s: %v", src, p.Func.Name, err)
	}
	prog, err := Program([]Func{{ID: 7, Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	r0, err := run(prog, 7, c)
	if err != nil {
		t.Fatalf("%q on %s: %v\n%v", src, p.Func.Name, err, prog)
	}
	if r0 > 1 {
		t.Fatalf("%q returned %d", src, r0)
	}
	return r0 == 1
}

func run(prog asm.Instructions, id uint32, c call) (uint64, error) {
	rec := make([]byte, recordSize)
	binary.LittleEndian.PutUint32(rec[funcOff:], id)
	binary.LittleEndian.PutUint64(rec[retOff:], c.ret)
	for slot, v := range c.slots {
		binary.LittleEndian.PutUint64(rec[int(slotsOff)+8*slot:], v)
	}
	m := &machine{record: rec, kernel: c.kernel, user: c.user}
	return m.run(prog)
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

// mem returns n bytes with the little-endian value v at off.
func mem(n, off int, v []byte) []byte {
	b := make([]byte, n)
	copy(b[off:], v)
	return b
}

func TestEval(t *testing.T) {
	fx := loadFixture(t)
	sendmsg := fx.plan(t, "tcp_sendmsg")     // (struct sock *sk, struct msghdr *msg, size_t size)
	drop := fx.plan(t, "sk_skb_reason_drop") // (struct sock *sk, struct sk_buff *skb, enum skb_drop_reason reason)
	openat := fx.plan(t, "do_sys_openat2")   // (int dfd, const char *filename, struct open_how *how)
	filpOpen := fx.plan(t, "do_filp_open")   // returns struct file *
	setState := fx.plan(t, "tcp_set_state")  // (struct sock *sk, int state)

	const sk, skb, how, name = 0x1000, 0x2000, 0x3000, 0x4000
	inet := map[uint64][]byte{sk: mem(64, 16, le16(2))}                                          // skc_family at 16
	inet6 := map[uint64][]byte{sk: mem(64, 16, le16(10))}                                        //
	bigSkb := map[uint64][]byte{skb: mem(256, 112, binary.LittleEndian.AppendUint32(nil, 1500))} // len at 112
	howMem := map[uint64][]byte{how: mem(24, 8, binary.LittleEndian.AppendUint64(nil, 0o640))}   // mode at 8
	str := func(s string) map[uint64][]byte { return map[uint64][]byte{name: append([]byte(s), 0)} }
	noSocket := uint64(fx.consts["SKB_DROP_REASON_NO_SOCKET"])

	tests := []struct {
		p    *plan.Plan
		src  string
		c    call
		want bool
	}{
		{sendmsg, "size > 1000", call{slots: map[int]uint64{2: 1500}}, true},
		{sendmsg, "size > 1000", call{slots: map[int]uint64{2: 500}}, false},
		{sendmsg, "size >= 500 && size <= 500", call{slots: map[int]uint64{2: 500}}, true},
		{sendmsg, "!(size > 10) || size == 50", call{slots: map[int]uint64{2: 50}}, true},
		{sendmsg, "!(size > 10) || size == 50", call{slots: map[int]uint64{2: 51}}, false},
		{sendmsg, "size & 0x10", call{slots: map[int]uint64{2: 0x30}}, true},
		{sendmsg, "size & 0x10", call{slots: map[int]uint64{2: 0x20}}, false},
		{sendmsg, "(size | 1) == 7 && (size & 2 | size & 4) == 6", call{slots: map[int]uint64{2: 6}}, true},
		{sendmsg, "1000 < size", call{slots: map[int]uint64{2: 1001}}, true},
		{sendmsg, "size == 0x123456789", call{slots: map[int]uint64{2: 0x123456789}}, true},
		{sendmsg, "size < -1", call{slots: map[int]uint64{2: 5}}, true}, // size_t: unsigned
		{sendmsg, "(size > 3) == 1", call{slots: map[int]uint64{2: 5}}, true},
		{sendmsg, "-size == -5", call{slots: map[int]uint64{2: 5}}, true},
		{sendmsg, "sk->__sk_common.skc_family == AF_INET", call{slots: map[int]uint64{0: sk}, kernel: inet}, true},
		{sendmsg, "sk->__sk_common.skc_family == AF_INET", call{slots: map[int]uint64{0: sk}, kernel: inet6}, false},
		{sendmsg, "sk->__sk_common.skc_family != AF_INET", call{slots: map[int]uint64{0: 0}}, false}, // NULL: unreadable
		{sendmsg, "sk != 0 && size == 1", call{slots: map[int]uint64{0: sk, 2: 1}}, true},
		{sendmsg, "ret < 0", call{ret: 0xdeadbeef_ffffffe0}, true}, // int -32, junk above
		{sendmsg, "ret == 5", call{ret: 0xdeadbeef_00000005}, true},
		{sendmsg, "ret == -EINVAL", call{ret: 0xdeadbeef_ffffffea}, true},
		{sendmsg, "ret == -EINVAL", call{ret: 0xdeadbeef_fffffffe}, false},
		{sendmsg, "ret != -ENOENT", call{ret: 0xdeadbeef_fffffffe}, false},
		{setState, "state == -1", call{slots: map[int]uint64{1: 0x12345678_ffffffff}}, true},
		{setState, "state < 0", call{slots: map[int]uint64{1: 7}}, false},
		{drop, "skb->len > 1000 && reason == SKB_DROP_REASON_NO_SOCKET", call{slots: map[int]uint64{1: skb, 2: noSocket}, kernel: bigSkb}, true},
		{drop, "skb->len > 1000 && reason == SKB_DROP_REASON_NO_SOCKET", call{slots: map[int]uint64{1: skb, 2: noSocket + 1}, kernel: bigSkb}, false},
		{drop, "skb->len > 2000", call{slots: map[int]uint64{1: skb}, kernel: bigSkb}, false},
		{openat, `filename == "/etc/passwd"`, call{slots: map[int]uint64{1: name}, user: str("/etc/passwd")}, true},
		{openat, `filename == "/etc/passwd"`, call{slots: map[int]uint64{1: name}, kernel: str("/etc/passwd")}, true},
		{openat, `"/etc/passwd" == filename`, call{slots: map[int]uint64{1: name}, user: str("/etc/passwd")}, true},
		{openat, `filename == "/etc/passwd"`, call{slots: map[int]uint64{1: name}, user: str("/etc/passwdX")}, false},
		{openat, `filename == "/etc/passwd"`, call{slots: map[int]uint64{1: name}, user: str("/etc/passw")}, false},
		{openat, `filename == "/etc/passwd"`, call{slots: map[int]uint64{1: name}, user: str("/etc/passwe")}, false},
		{openat, `filename != "/etc/passwd"`, call{slots: map[int]uint64{1: name}, user: str("/etc/group")}, true},
		{openat, `filename != "/etc/passwd"`, call{slots: map[int]uint64{1: name}, user: str("/etc/passwd")}, false},
		{openat, `filename != "/etc/passwd"`, call{slots: map[int]uint64{1: name}}, false}, // unreadable
		{openat, `filename ~ "/tmp/*"`, call{slots: map[int]uint64{1: name}, user: str("/tmp/x")}, true},
		{openat, `filename ~ "/tmp/*"`, call{slots: map[int]uint64{1: name}, user: str("/tmp/")}, true},
		{openat, `filename ~ "/tmp/*"`, call{slots: map[int]uint64{1: name}, user: str("/tmp")}, false},
		{openat, `filename ~ "/tmp/*"`, call{slots: map[int]uint64{1: name}, user: str("/etc/x")}, false},
		{openat, `!(filename ~ "/tmp/*")`, call{slots: map[int]uint64{1: name}, user: str("/etc/x")}, true},
		{openat, `filename ~ "/tmp"`, call{slots: map[int]uint64{1: name}, user: str("/tmp/x")}, false},
		{openat, `filename ~ "*"`, call{slots: map[int]uint64{1: name}, user: str("")}, true},
		{openat, `how->mode == 0640 && dfd == -100`, call{slots: map[int]uint64{0: 0xffffff9c, 1: name, 2: how}, kernel: howMem}, true},
		{filpOpen, "ret == 0", call{ret: 0}, true},
		{filpOpen, "ret == 0", call{ret: 0xffff888000001000}, false},
	}
	for _, tt := range tests {
		if got := eval(t, fx, tt.p, tt.src, tt.c); got != tt.want {
			t.Errorf("%s: %q on %+v = %v, want %v", tt.p.Func.Name, tt.src, tt.c, got, tt.want)
		}
	}
}

// TestBitfieldsAndArrays uses made-up types: a struct with signed and
// unsigned bitfields and a char array.
func TestBitfieldsAndArrays(t *testing.T) {
	u32 := &btf.Int{Name: "unsigned int", Size: 4}
	s32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	s := &btf.Struct{Name: "thing", Size: 24, Members: []btf.Member{
		{Name: "a", Type: u32, Offset: 0, BitfieldSize: 3},
		{Name: "b", Type: s32, Offset: 3, BitfieldSize: 5},
		{Name: "c", Type: u32, Offset: 8, BitfieldSize: 20},
		{Name: "comm", Type: &btf.Array{Type: char, Nelems: 16}, Offset: 64},
	}}
	fn := &btf.Func{Name: "thing_fn", Type: &btf.FuncProto{Return: s32, Params: []btf.FuncParam{{Name: "t", Type: &btf.Pointer{Target: s}}}}}
	p := planOf(t, fn)
	fx := &fixture{consts: Constants{}}
	const at = 0x5000
	// a = 5, b = -3 (0b11101), c = 0xabcde, comm = "bash".
	b := make([]byte, 24)
	v := uint32(5) | uint32(0b11101)<<3 | uint32(0xabcde)<<8
	binary.LittleEndian.PutUint32(b, v)
	copy(b[8:], "bash")
	c := call{slots: map[int]uint64{0: at}, kernel: map[uint64][]byte{at: b}}
	for src, want := range map[string]bool{
		"t->a == 5 && t->b == -3 && t->c == 0xabcde": true,
		"t->b < 0":             true,
		"t->a == 4":            false,
		`t->comm == "bash"`:    true,
		`t->comm ~ "ba*"`:      true,
		`t->comm == "bas"`:     false,
		`t->comm != "bashful"`: true,
	} {
		if got := eval(t, fx, p, src, c); got != want {
			t.Errorf("%q = %v, want %v", src, got, want)
		}
	}
}

func TestDispatch(t *testing.T) {
	fx := loadFixture(t)
	sendmsg := fx.plan(t, "tcp_sendmsg")
	setState := fx.plan(t, "tcp_set_state")
	e, err := Parse("ret == 1")
	if err != nil {
		t.Fatal(err)
	}
	e2, err := Parse("state == 9")
	if err != nil {
		t.Fatal(err)
	}
	retBody, err := Compile(e, sendmsg, fx.consts)
	if err != nil {
		t.Fatal(err)
	}
	stateBody, err := Compile(e2, setState, fx.consts)
	if err != nil {
		t.Fatal(err)
	}
	var funcs []Func
	for id := uint32(0); id < 40; id++ {
		if id%3 == 0 {
			continue // not attached
		}
		body := retBody
		if id%2 == 0 {
			body = stateBody
		}
		funcs = append(funcs, Func{ID: id, Body: body})
	}
	prog, err := Program(funcs)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(prog.String(), "Exit"); n != 2*2+1 {
		t.Errorf("%d exits, want two per distinct body and one for unknown functions:\n%v", n, prog)
	}
	c := call{ret: 1, slots: map[int]uint64{1: 9}}
	for id := uint32(0); id < 45; id++ {
		r0, err := run(prog, id, c)
		if err != nil {
			t.Fatalf("function %d: %v", id, err)
		}
		want := uint64(1)
		if id%3 == 0 || id >= 40 {
			want = 0
		}
		if r0 != want {
			t.Errorf("function %d: %d, want %d", id, r0, want)
		}
	}
	c = call{ret: 2, slots: map[int]uint64{1: 9}}
	if r0, _ := run(prog, 1, c); r0 != 0 {
		t.Errorf("function 1 (ret == 1) passed ret 2")
	}
}

func TestErrors(t *testing.T) {
	for src, want := range map[string]struct {
		pos int
		msg string
	}{
		"size >":         {6, "want an argument"},
		"size > > 1":     {7, "want an argument"},
		"(size > 1":      {9, "want ) to close the ( at column 1"},
		`name == "abc`:   {8, "closing quote"},
		"size $ 1":       {5, "unexpected character"},
		"size > 12x":     {7, "bad integer"},
		`name ~ 5`:       {7, "~ wants a string"},
		"sk->":           {4, "want a member name"},
		"sk->5":          {4, "want a member name"},
		"1->a":           {1, "after a constant"},
		"size 1":         {5, "unexpected"},
		"":               {0, "want an argument"},
		`name == "a\qb"`: {8, "bad escape"},
		"a )":            {2, "unexpected"},
	} {
		_, err := Parse(src)
		var fe *Error
		if !errors.As(err, &fe) {
			t.Errorf("%q: error %v, want a *Error", src, err)
			continue
		}
		if fe.Pos != want.pos || !strings.Contains(fe.Msg, want.msg) {
			t.Errorf("%q: %q at %d, want %q at %d", src, fe.Msg, fe.Pos, want.msg, want.pos)
		}
	}
	_, err := Parse("size >> 1")
	if got, want := err.Error(), "filter: want an argument, a constant or (, found \">\" at column 7\n  size >> 1\n        ^"; got != want {
		t.Errorf("error text:\n%s\nwant:\n%s", got, want)
	}
	deep := strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100)
	if _, err := Parse(deep); err == nil {
		t.Errorf("100 nested parentheses parsed")
	}
}

func TestCompileErrors(t *testing.T) {
	fx := loadFixture(t)
	sendmsg := fx.plan(t, "tcp_sendmsg")
	drop := fx.plan(t, "sk_skb_reason_drop")
	for _, tt := range []struct {
		p       *plan.Plan
		src     string
		pos     int
		msg     string
		missing bool
	}{
		{sendmsg, "skb->len > 1", 0, "no argument skb", true},
		{sendmsg, "size > NO_SUCH_CONST", 7, "no argument or constant NO_SUCH_CONST", true},
		{sendmsg, "sk->nope == 1", 2, "has no member nope", false},
		{sendmsg, "size->len == 1", 4, "not a pointer", false},
		{sendmsg, "sk == 1 && *sk", 11, "unexpected", false},
		{sendmsg, "msg->msg_iter == 1", 3, "cannot compare", false},
		{sendmsg, `size == "x"`, 0, "not a string", false},
		{sendmsg, `sk->__sk_common.skc_family ~ "x*y*"`, 31, "only a trailing *", false},
		{sendmsg, `"a" == "b"`, 4, "two strings", false},
		{sendmsg, `size < "a"`, 5, "strings compare with", false},
		{sendmsg, `"x" && 1`, 0, "a string compares only", false},
		{drop, "ret == 1", 0, "returning void", false},
		{sendmsg, "AF_INET->x", 0, "constant, not a struct", false},
	} {
		e, err := Parse(tt.src)
		if err == nil {
			_, err = Compile(e, tt.p, fx.consts)
		}
		var fe *Error
		if !errors.As(err, &fe) {
			t.Errorf("%q: error %v, want a *Error", tt.src, err)
			continue
		}
		if fe.Pos != tt.pos || !strings.Contains(fe.Msg, tt.msg) || errors.Is(err, ErrMissing) != tt.missing {
			t.Errorf("%q: %q at %d (missing: %v), want %q at %d (missing: %v)", tt.src, fe.Msg, fe.Pos, errors.Is(err, ErrMissing), tt.msg, tt.pos, tt.missing)
		}
	}
}

func TestUsesRet(t *testing.T) {
	for src, want := range map[string]bool{"ret < 0": true, "a && !(ret == 1)": true, "a->ret == 1": false, "a == 1": false} {
		e, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if e.UsesRet() != want {
			t.Errorf("%q: UsesRet = %v", src, !want)
		}
	}
}
