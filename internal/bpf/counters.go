// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// Counter is one of the capture program's counters: an enumerator of enum
// counter in capture.h.
type Counter struct {
	// Name is the enumerator's, such as CNT_MISS_EXIT.
	Name string
	// Key is the counter's key in the counters map.
	Key uint32
}

// Counters lists the capture program's counters, CNT_MAX left out, from
// the BTF of its object: a counter added to capture.h is listed without
// any change in Go.
var Counters = sync.OnceValues(func() ([]Counter, error) {
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(_CaptureBytes))
	if err != nil {
		return nil, fmt.Errorf("read the BTF of the capture program: %w", err)
	}
	var counter *btf.Enum
	if err := spec.TypeByName("counter", &counter); err != nil {
		return nil, fmt.Errorf("find the counters of the capture program: %w", err)
	}
	var cs []Counter
	for _, v := range counter.Values {
		if v.Name != "CNT_MAX" {
			cs = append(cs, Counter{Name: v.Name, Key: uint32(v.Value)})
		}
	}
	return cs, nil
})
