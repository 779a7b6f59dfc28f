// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// callsArg as the first argument makes the test binary call getppid the
// number of times in the second argument, then close(-1), which fails
// with EBADF, the number of times in the third.
const callsArg = "__calls"

func calls(getppids, closes int) {
	for range getppids {
		syscall.Getppid()
	}
	for range closes {
		syscall.Close(-1)
	}
}

// TestStatsCountsExactly traces a command that calls getppid and a
// failing close a known number of times with --stats on every backend the
// kernel has: the kernel counts every call, and every error, exactly.
func TestStatsCountsExactly(t *testing.T) {
	guest.Require(t)
	const getppids, closes = 20000, 300
	for _, b := range backendsHere(t) {
		t.Run(b, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "stats")
			cmd := trawlCmd("--backend", b, "--stats", "-o", out, hotFunc, "*sys_close", "--",
				os.Args[0], callsArg, strconv.Itoa(getppids), strconv.Itoa(closes))
			_, stderr, status := runLimited(t, cmd, startLimit+stopLimit)
			if status != 0 {
				t.Fatalf("status %d\n%s", status, stderr)
			}
			if !strings.Contains(stderr, " counted in the kernel") {
				t.Errorf("the calls were not counted in the kernel:\n%s", stderr)
			}
			table, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			rows := statsRows(string(table))
			if got := rows["getppid"]; got != [2]uint64{getppids, 0} {
				t.Errorf("getppid: %d calls, %d errors; want %d, 0\n%s", got[0], got[1], getppids, table)
			}
			if got := rows["close"]; got[0] < closes || got[1] != closes {
				t.Errorf("close: %d calls, %d errors; want at least %d calls and %[3]d errors\n%s", got[0], got[1], closes, table)
			}
		})
	}
}

// statsRows returns the calls and errors of each row of a --stats table,
// by the name of the system call the row's function implements (sums of
// __x64_sys_close and __ia32_sys_close: getppid is called natively, but
// the kernel may build compat entries).
func statsRows(table string) map[string][2]uint64 {
	rows := map[string][2]uint64{}
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		_, name, ok := strings.Cut(f[0], "sys_")
		calls, err1 := strconv.ParseUint(f[1], 10, 64)
		errs, err2 := strconv.ParseUint(f[2], 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		r := rows[name]
		rows[name] = [2]uint64{r[0] + calls, r[1] + errs}
	}
	return rows
}
