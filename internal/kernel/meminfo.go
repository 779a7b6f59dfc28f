// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"fmt"
	"os"
	"strings"
)

// MemInfo returns the fields of /proc/meminfo given in kB, in bytes, by
// name ("MemAvailable", "Slab", ...).
func MemInfo() (map[string]int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	return parseMemInfo(string(b))
}

func parseMemInfo(s string) (map[string]int64, error) {
	m := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) == 0 {
			return nil, fmt.Errorf("/proc/meminfo: bad line %q", line)
		}
		var v int64
		if _, err := fmt.Sscan(fields[0], &v); err != nil {
			return nil, fmt.Errorf("/proc/meminfo: bad line %q: %w", line, err)
		}
		if len(fields) > 1 && fields[1] == "kB" {
			v <<= 10
		}
		m[name] = v
	}
	return m, nil
}
