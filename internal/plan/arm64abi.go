// SPDX-License-Identifier: Apache-2.0

package plan

// The AArch64 procedure call standard, as used by the kernel.
//
// Source: Procedure Call Standard for the Arm 64-bit Architecture
// (AAPCS64), §6.8.2 "Parameter passing rules", stages B and C
// (https://github.com/ARM-software/abi-aa/blob/main/aapcs64/aapcs64.rst).
// The kernel has no floating point code, so only the general registers
// x0-x7 (NGRN) and the stack (NSAA) are used:
//
//   - B.4: a composite (struct or union) over 16 bytes is copied by the
//     caller and replaced by a pointer to the copy.
//   - C.10: a value with 16-byte alignment starts at an even register.
//   - C.12: a value of one or two doublewords that fits in the remaining
//     registers takes consecutive registers.
//   - C.13: otherwise no further argument uses a register (NGRN = 8) ...
//   - C.14-C.16: ... and the value goes on the stack at an offset aligned
//     to max(8, its alignment), taking its size rounded up to 8. The first
//     stack argument is at sp+0 at function entry.
//   - The indirect result of a large struct return goes in x8, which does
//     not move the arguments.

const arm64ArgRegs = 8

func placeARM64(args []Arg) {
	reg, stack := 0, 0
	for i := range args {
		a := &args[i]
		size, indirect := a.Size, false
		if a.Class == Struct && a.Size > 16 {
			size, indirect = 8, true
		}
		need := (size + 7) / 8
		align := 8
		if !indirect {
			align = max(8, alignment(a.Type))
		}
		if align == 16 && reg%2 == 1 && reg < arm64ArgRegs {
			reg++
		}
		if reg+need <= arm64ArgRegs {
			a.Kprobe[ARM64] = Loc{Kind: InReg, Reg: int8(reg), Indirect: indirect}
			reg += need
			continue
		}
		reg = arm64ArgRegs
		stack = alignUp(stack, align)
		a.Kprobe[ARM64] = Loc{Kind: OnStack, Offset: int32(stack), Indirect: indirect}
		stack += alignUp(size, 8)
	}
}
