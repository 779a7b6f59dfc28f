// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// addCounters adds each of the capture program's per-CPU counters in m
// into its field of st (see statsField). The counters come from the
// program's BTF (bpf.Counters), so a counter added to capture.h needs
// only its field in Stats.
func addCounters(st *Stats, m *ebpf.Map) error {
	counters, err := bpf.Counters()
	if err != nil {
		return err
	}
	fields := reflect.ValueOf(st).Elem()
	for _, c := range counters {
		f, ok := statsField(c.Name)
		if !ok {
			return fmt.Errorf("counter %s has no field in Stats", c.Name)
		}
		var perCPU []uint64
		if err := m.Lookup(c.Key, &perCPU); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		dst := fields.FieldByIndex(f.Index)
		for _, v := range perCPU {
			dst.SetUint(dst.Uint() + v)
		}
	}
	return nil
}

// statsField finds the Stats field of a counter: the uint64 named as the
// counter without CNT_ and underscores, in any case (MissExit for
// CNT_MISS_EXIT, MissPIDs for CNT_MISS_PIDS).
func statsField(counter string) (reflect.StructField, bool) {
	name := strings.ReplaceAll(strings.TrimPrefix(counter, "CNT_"), "_", "")
	f, ok := reflect.TypeFor[Stats]().FieldByNameFunc(func(field string) bool {
		return strings.EqualFold(field, name)
	})
	return f, ok && f.Type.Kind() == reflect.Uint64
}
