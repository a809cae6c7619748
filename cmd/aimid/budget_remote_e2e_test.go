package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSwarmBudgetStopsARemoteModeContainer: git.mode remote (origin an
// HTTPS server of the test's, with its own CA), the real runner and an
// agent whose calls through the model gateway a fake provider answers
// with usage. The runner asks about the budget on its container's own
// budget socket: the first story reaches swarm.budget, completes and is
// pushed to origin, and the container begins no second one and stops
// with BUDGET_EXCEEDED and the figures.
func TestSwarmBudgetStopsARemoteModeContainer(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var bare string
	cfg := strings.Replace(budgetConfig("2", "0"), "mode: local", "mode: remote", 1)
	b := startBudgetSwarmWith(t, ctx, cfg, func(b *budgetRun) []string {
		origin := startHTTPSOrigin(t, b.name)
		bare = origin.bare
		gitOut(t, b.repo, "remote", "add", "origin", origin.url)
		gitOut(t, b.repo, "config", "http.sslCAInfo", origin.caFile)
		caEnv := "GIT_SSL_CAINFO=" + origin.caFile
		for _, args := range [][]string{{"push", "-q", "origin", "main"}, {"fetch", "-q", "origin"}} {
			cmd := exec.Command("git", append([]string{"-C", b.repo}, args...)...)
			cmd.Env = append(os.Environ(), caEnv)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		return []string{"AIMI_GIT_ORIGIN_CA=" + origin.caFile, caEnv}
	})
	defer b.p.stop(t)
	b.stopsAfterTheFirstStory(t, func(calls int32) string {
		return fmt.Sprintf("BUDGET_EXCEEDED: the swarm spent %.4f of its budget 2.0000 (swarm.budget", 3*float64(calls))
	})
	out, err := exec.Command("git", "-C", bare, "log", "--format=%s", "main.."+b.branch).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "US-001: Story 1 (completed)") || strings.Contains(string(out), "US-002") {
		t.Fatalf("origin's %s: %v\n%s", b.branch, err, out)
	}
}
