package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoEngineCode: the CLI speaks to aimid through package api; it
// links neither the orchestrator nor any Docker package.
func TestLinksNoEngineCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/docker/") || dep == "github.com/aimi-tools/swarm/orchestrator" || dep == "github.com/aimi-tools/swarm/container" {
			t.Errorf("aimi depends on %s", dep)
		}
	}
}
