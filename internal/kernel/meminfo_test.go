// SPDX-License-Identifier: Apache-2.0

package kernel

import "testing"

func TestParseMemInfo(t *testing.T) {
	m, err := parseMemInfo("MemTotal:       24576000 kB\nMemAvailable:    1024 kB\nHugePages_Total:       0\n")
	if err != nil {
		t.Fatal(err)
	}
	if m["MemTotal"] != 24576000<<10 || m["MemAvailable"] != 1024<<10 || m["HugePages_Total"] != 0 {
		t.Errorf("parsed %v", m)
	}
	if _, err := parseMemInfo("MemTotal 12 kB"); err == nil {
		t.Error("a line without a colon parsed")
	}
}

func TestMemInfo(t *testing.T) {
	m, err := MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if m["MemAvailable"] <= 0 || m["MemTotal"] < m["MemAvailable"] {
		t.Errorf("MemTotal %d, MemAvailable %d", m["MemTotal"], m["MemAvailable"])
	}
}
