package demoagent

import (
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

func TestAttemptMarkers(t *testing.T) {
	t.Setenv(contract.EnvAttempt, "2")
	tr := &turn{prompt: "Story US-001 " + MarkerAttempt + " " + MarkerSlowAttempt + "2]"}
	if got := tr.attemptLines(); got != "attempt 2\nattempt 2\n" {
		t.Errorf("attemptLines = %q", got)
	}
	if !tr.slowAttempt() {
		t.Error("attempt 2 should take its time")
	}
	t.Setenv(contract.EnvAttempt, "3")
	if tr.slowAttempt() {
		t.Error("attempt 3 should not take its time")
	}
	if got := (&turn{prompt: "Story US-001"}).attemptLines(); got != "" {
		t.Errorf("no marker: %q", got)
	}
}
