// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"errors"
	"testing"
)

func TestRun(t *testing.T) {
	if err := Run(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
}

func TestRunStopsWhenDone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Run(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context returned %v, want %v", err, context.Canceled)
	}
}
