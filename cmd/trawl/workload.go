// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/trawl-dev/trawl/internal/workload"
)

// workloadCommand is the hidden subcommand that --workload runs.
const workloadCommand = "__workload"

// runWorkload runs one loop of trawl's test workload (internal/workload):
// a few system calls with visible arguments.
func runWorkload(ctx context.Context, _ []string, stdout, _ io.Writer) error {
	if err := workload.Run(ctx, 1); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "workload: "+workload.Summary)
	return nil
}
