// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
)

func TestClassify(t *testing.T) {
	verifier := func(log ...string) error {
		return fmt.Errorf("load program: %w", &ebpf.VerifierError{Cause: syscall.EINVAL, Log: log})
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // a word of the reason, "" for an error that aborts
	}{
		{"too many arguments", verifier("The function foo has 13 arguments. Too many.", "processed 0 insns"), "model its prototype"},
		{"struct argument", verifier("The function bar arg0 type STRUCT is unsupported."), "model its prototype"},
		// A refusal of trawl's own program (the 6.1 bug of 488153f) is
		// not a prototype the kernel cannot model, even though the log
		// speaks of arguments.
		{"program refused", verifier("R1 type=ctx expected=fp", "arg#0 reference type('UNKNOWN ') size cannot be determined", "math between map_value pointer and register with unbounded min value is not allowed"), "trawl bug"},
		{"busy", fmt.Errorf("attach: %w", syscall.EBUSY), "busy"},
		{"other", fmt.Errorf("attach: %w", syscall.ENOMEM), ""},
	} {
		got := classify(tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: classify = %q, want a reason with %q", tc.name, got, tc.want)
		}
	}
}
