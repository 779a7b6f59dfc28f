// SPDX-License-Identifier: Apache-2.0

package render_test

import (
	"os"

	"github.com/trawl-dev/trawl/call"
	"github.com/trawl-dev/trawl/render"
)

// Render a call as a JSON line. Calls come from trawl.Session.Read; this
// one is made up.
func ExampleNewJSON() {
	c := call.Call{
		TS: 1500, Duration: 2500, CPU: 1, PID: 42, TID: 42, Comm: "cat", Func: "vfs_read",
		Args: []call.Value{
			{Kind: call.KindPointer, Name: "file", Bits: 0xffff888012345678},
			{Kind: call.KindUint, Name: "count", Bits: 4096},
		},
		Ret: call.Value{Kind: call.KindErrno, Bits: ^uint64(0) - 1, Str: "ENOENT"},
	}
	r := render.NewJSON(os.Stdout, render.Options{})
	r.Call(&c)
	r.Close()
	// Output:
	// {"ts":1500,"cpu":1,"pid":42,"tid":42,"comm":"cat","func":"vfs_read","args":{"file":"0xffff888012345678","count":4096},"ret":-2,"errno":"ENOENT","duration_ns":2500,"depth":0}
}
