package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// A request the git service refuses a running container becomes a
// git-refused daemon record in its journal and a count in the view; the
// count is rebuilt from the journal by the next daemon's Recover, which
// hears the service's refusals from then on.
func TestGitRefusalIsJournaledCountedAndRecovered(t *testing.T) {
	t.Parallel()
	repo, files := testRepo(t, []string{"gr"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, step{hang: true})))
	git := &fakeGit{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m1, err := New(context.Background(), Config{Image: "standin:test", Logger: testLogger(t), Git: git, Publisher: git}, eng)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m1.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	sb := contract.Sandbox{Swarm: v.State.SwarmID, Container: v.Containers[0].Name}
	waitRunning(t, m1, repo)
	const reason = "a push to refs/heads/main was refused: this container may push only refs/heads/feat/gr"
	git.refuse(sb, reason)
	git.refuse(contract.Sandbox{Swarm: sb.Swarm, Container: "aimi-not-held"}, reason)
	if d := refusedView(t, m1, repo); d.GitRefused != 1 {
		t.Errorf("view: gitRefused %d, want 1", d.GitRefused)
	}
	if err := m1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var journaled []string
	for _, r := range readJournal(t, repo, sb.Swarm, sb.Container) {
		if r.Stream == state.StreamDaemon && r.Type == state.TypeGitRefused {
			journaled = append(journaled, r.Reason)
		}
	}
	if len(journaled) != 1 || journaled[0] != reason {
		t.Fatalf("git-refused records %q, want one with %q", journaled, reason)
	}

	m2 := newTestManager(t, eng, Config{Git: git, Publisher: git})
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if d := refusedView(t, m2, repo); d.GitRefused != 1 {
		t.Errorf("after Recover: gitRefused %d, want the journal's 1", d.GitRefused)
	}
	git.refuse(sb, reason)
	if d := refusedView(t, m2, repo); d.GitRefused != 2 {
		t.Errorf("a refusal after Recover: gitRefused %d, want 2", d.GitRefused)
	}
}

// waitRunning waits until the swarm's first container runs.
func waitRunning(t *testing.T, m *Manager, repo string) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, "the first container running", func() error {
		v, err := m.Status(context.Background(), repo)
		if err == nil && v.State.Containers[0].Status != state.StatusRunning {
			err = errors.New(describe(v))
		}
		return err
	}, testwait.Every(5*time.Millisecond))
}

// refusedView is the swarm's first container as the view shows it.
func refusedView(t *testing.T, m *Manager, repo string) api.ContainerDetail {
	t.Helper()
	v, err := m.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Containers) != 1 {
		t.Fatalf("containers %s, want one", describe(v))
	}
	return v.Containers[0]
}
