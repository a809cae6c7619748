package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// StoriesRunning lists the stories a container reported in progress (a
// grant of scope once lasts as long as they), and none once it ended.
func TestStoriesRunningFollowsTheContainersReports(t *testing.T) {
	progs := map[string]program{"hold": scripted(0, step{story: "US-001", status: "in_progress"}, step{hang: true})}
	repo, files := testRepo(t, []string{"hold"}, 1)
	m := newTestManager(t, newFakeEngine(byTask(progs, nil)), Config{Timeout: time.Minute, StopGrace: 50 * time.Millisecond, MaxContainers: 2})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	var sb contract.Sandbox
	testwait.Eventually(t, 20*time.Second, "US-001 reported in progress", func() error {
		v, err := m.Status(context.Background(), repo)
		if err != nil || v.State == nil || len(v.Containers) != 1 {
			return fmt.Errorf("status %v", err)
		}
		sb = contract.Sandbox{Swarm: v.State.SwarmID, Container: v.Containers[0].Name}
		if got := m.StoriesRunning(sb); !slices.Equal(got, []string{"US-001"}) {
			return fmt.Errorf("stories running %v", got)
		}
		return nil
	})
	if _, err := m.Stop(context.Background(), repo, nil); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, 20*time.Second)
	if got := m.StoriesRunning(sb); len(got) != 0 {
		t.Errorf("after the stop: %v", got)
	}
	if got := m.StoriesRunning(contract.Sandbox{Swarm: "nope", Container: sb.Container}); got != nil {
		t.Errorf("another swarm: %v", got)
	}
}
