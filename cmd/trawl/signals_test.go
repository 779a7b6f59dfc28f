// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestHangupStops checks that SIGHUP, sent when the terminal or the ssh
// connection trawl runs in goes away, stops a run as SIGINT and SIGTERM
// do. TestStopSystemWide checks the rest in a guest: the output flushed,
// the summary printed, status 0.
func TestHangupStops(t *testing.T) {
	ctx := handleSignals()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not stop the run")
	}
	if sig := signalOf(ctx); sig != syscall.SIGHUP {
		t.Errorf("signalOf = %v, want SIGHUP", sig)
	}
	if hurried(ctx) {
		t.Error("one SIGHUP hurried the run")
	}
	s := newStopper(ctx)
	defer s.release()
	deadline := time.Now().Add(10 * time.Second)
	for !s.fired() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !s.fired() || s.why() != "interrupted" {
		t.Errorf("stopper fired %v, why %q; want fired, interrupted", s.fired(), s.why())
	}
}
