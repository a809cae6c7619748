package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
)

// A daemon run in a test's process leaves the process's default logger
// alone: other tests' goroutines log through it, and one pointed at this
// daemon's stderr buffer raced with them.
//
// Not parallel: it stops at the configuration, in microseconds, with no
// engine or daemon to wait for; a slot would gain nothing.
func TestInProcessDaemonLeavesTheDefaultLogger(t *testing.T) {
	before := slog.Default()
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--git-mode", "neither", "--config", "-"}, &stderr, nil); code == 0 {
		t.Fatalf("a daemon with git.mode neither started:\n%s", stderr.String())
	}
	if slog.Default() != before {
		t.Error("run replaced the default logger")
	}
}
