// SPDX-License-Identifier: Apache-2.0

package trawl

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/trawl-dev/trawl/internal/bpf"
)

// MaxCPUs bounds the CPUs Config.CPUs can name: 0 to MaxCPUs-1.
const MaxCPUs = 1024

// cpuMask is the capture program's filter_cpus: a bit a CPU.
type cpuMask [MaxCPUs / 64]uint64

// checkCPUs checks the CPUs of Config.CPUs.
func checkCPUs(cpus []int) error {
	for _, cpu := range cpus {
		if cpu < 0 || cpu >= MaxCPUs {
			return fmt.Errorf("--cpu %d: want a CPU from 0 to %d", cpu, MaxCPUs-1)
		}
	}
	return nil
}

// configureCPUs sets the capture program's CPU filter (filter_cpu in
// internal/bpf/taskfilter.h): only calls entered on one of cpus are
// traced. Without cpus it leaves the filter off, which the lean build
// compiles away.
func configureCPUs(spec *ebpf.CollectionSpec, cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	var mask cpuMask
	for _, cpu := range cpus {
		mask[cpu/64] |= 1 << (cpu % 64)
	}
	if err := spec.Variables[bpf.CaptureVarFilterCpus].Set(mask); err != nil {
		return fmt.Errorf("set the CPU filter: %w", err)
	}
	return spec.Variables[bpf.CaptureVarFilterCpu].Set(uint32(1))
}
