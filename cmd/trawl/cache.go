// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"

	"github.com/trawl-dev/trawl"
)

// noCacheUsage is the usage of the --no-cache flag of the commands that
// read the kernel's functions.
const noCacheUsage = "read the kernel's lists of functions from the kernel, neither reading nor writing those kept in " + trawl.DefaultCatalogueCache + " for this boot"

func newCacheCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Manage the kernel's lists of functions kept for this boot",
		Long: `The kernel takes most of trawl's start to write its lists of functions
(/proc/kallsyms and the traceable list of tracefs). The first trace or list of
a boot, run as root, keeps them in ` + trawl.DefaultCatalogueCache + ` (root's alone, mode 0700) once
tracing is set up, and later ones read them back. They are read from the kernel
again after a reboot, a module loaded or removed, or a change of BTF, and when
the file is damaged or not root's alone. --no-cache skips them.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "clear",
		Short: "Remove the kernel's lists kept for this boot",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return trawl.ClearCatalogueCache("")
		},
	})
	return cmd
}
