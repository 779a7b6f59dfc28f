// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"syscall"

	"github.com/trawl-dev/trawl/internal/decode"
)

// ErrnoByName returns the error number of a name such as "ENOENT",
// including the kernel's internal ones ("ENOTSUPP", "ERESTARTSYS"), for
// Config.Errnos and Config.ExceptErrnos.
func ErrnoByName(name string) (syscall.Errno, error) {
	n, ok := decode.ErrnoNumber(name)
	if !ok {
		return 0, fmt.Errorf("no error number is named %q", name)
	}
	return syscall.Errno(n), nil
}

// ErrnoName returns the name of a positive error number, such as "ENOENT",
// including the kernel's internal ones, or "" if it has none.
func ErrnoName(errno syscall.Errno) string { return decode.ErrnoName(int64(errno)) }
