// SPDX-License-Identifier: Apache-2.0

package rawbpf

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// KfuncCall returns the instruction that calls the vmlinux kfunc name, for
// a program that LoadTracing loads (it carries the kfunc's BTF id; module
// kfuncs would need an fd_array, which this package does not build).
//
// The session kfuncs of fsession programs are bpf_session_is_return(ctx)
// and bpf_session_cookie(ctx), which returns a pointer to one u64 shared by
// the entry and the exit run of one call; both take ctx from Linux 7.0.
func KfuncCall(name string) (asm.Instruction, error) {
	id, err := kernelFuncID(name)
	if err != nil {
		return asm.Instruction{}, fmt.Errorf("kfunc %s: %w", name, err)
	}
	return asm.Instruction{
		OpCode:   asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call),
		Src:      asm.PseudoKfuncCall,
		Constant: int64(id),
	}, nil
}
