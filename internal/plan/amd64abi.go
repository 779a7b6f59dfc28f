// SPDX-License-Identifier: Apache-2.0

package plan

// The x86-64 System V calling convention, as used by the kernel.
//
// Source: System V Application Binary Interface, AMD64 Architecture
// Processor Supplement, §3.2.3 "Parameter Passing"
// (https://gitlab.com/x86-psABIs/x86-64-ABI). The kernel has no floating
// point code, so every argument is of class INTEGER or MEMORY:
//
//   - INTEGER values (ints, enums, pointers, and structs or unions of at
//     most 16 bytes, one register per eightbyte) take the next free of
//     rdi, rsi, rdx, rcx, r8, r9. When fewer registers remain than the
//     value needs, the whole value goes on the stack, and later arguments
//     may still take the remaining registers.
//   - MEMORY values (structs over 16 bytes) are copied onto the stack.
//   - A MEMORY return value is written through a hidden pointer passed in
//     rdi, so the arguments start at rsi.
//   - Stack arguments start at rsp+8 at function entry (the return address
//     is at rsp), each at an offset aligned to max(8, its alignment) and
//     taking its size rounded up to 8.

const amd64ArgRegs = 6

// amd64StackStart is the offset of the first stack argument at entry.
const amd64StackStart = 8

func placeAMD64(args []Arg, ret Ret) {
	reg := 0
	if ret.Class == Struct && ret.Size > 16 {
		reg = 1
	}
	stack := amd64StackStart
	for i := range args {
		a := &args[i]
		need := (a.Size + 7) / 8
		if need <= 2 && reg+need <= amd64ArgRegs {
			a.Kprobe[AMD64] = Loc{Kind: InReg, Reg: int8(reg)}
			reg += need
			continue
		}
		stack = alignUp(stack, max(8, alignment(a.Type)))
		a.Kprobe[AMD64] = Loc{Kind: OnStack, Offset: int32(stack)}
		stack += alignUp(a.Size, 8)
	}
}
