package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoEngineCode: the runner inside each sandbox shares only names
// (package contract) and message types with the daemon; it links neither
// the Docker client nor the daemon's packages.
func TestLinksNoEngineCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, "github.com/docker/"),
			dep == "github.com/aimi-tools/swarm/orchestrator",
			dep == "github.com/aimi-tools/swarm/container",
			dep == "github.com/aimi-tools/swarm/daemon":
			t.Errorf("acp-runner depends on %s", dep)
		}
	}
}
