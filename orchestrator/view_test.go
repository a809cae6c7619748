package orchestrator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
)

func TestViewShowsEachStoryWithItsDependenciesAndStatus(t *testing.T) {
	repo, files := testRepo(t, []string{"graph"}, 3)
	eng := newFakeEngine(byTask(nil, scripted(time.Millisecond, storiesDone(3)...)))
	m := newTestManager(t, eng, Config{})
	v, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	d := detail(t, v, "graph")
	if len(d.Stories) != 3 {
		t.Fatalf("stories at start = %+v, want the task file's 3", d.Stories)
	}
	for i, s := range d.Stories {
		if s.Status != "pending" || s.Title == "" {
			t.Errorf("story %d at start = %+v, want pending with a title", i, s)
		}
	}
	if !slices.Equal(d.Stories[2].DependsOn, []string{"US-002"}) || len(d.Stories[0].DependsOn) != 0 {
		t.Errorf("dependsOn = %v / %v, want [] and [US-002]", d.Stories[0].DependsOn, d.Stories[2].DependsOn)
	}
	v = waitTerminal(t, m, repo, 20*time.Second)
	for _, s := range detail(t, v, "graph").Stories {
		if s.Status != "completed" {
			t.Errorf("story %s = %s after the run, want completed", s.ID, s.Status)
		}
	}
}

func TestListAnswersEverySwarmByRepository(t *testing.T) {
	repoA, filesA := testRepo(t, []string{"alpha"}, 1)
	repoB, filesB := testRepo(t, []string{"beta"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(time.Millisecond, storiesDone(1)...)))
	m := newTestManager(t, eng, Config{})
	if l := m.List(context.Background()); len(l) != 0 {
		t.Fatalf("List before any swarm = %d swarms, want none", len(l))
	}
	for _, r := range []api.StartRequest{{RepoPath: repoA, TaskFiles: filesA}, {RepoPath: repoB, TaskFiles: filesB}} {
		if _, err := m.Start(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	l := m.List(context.Background())
	var repos []string
	for _, v := range l {
		repos = append(repos, v.RepoPath)
		if len(v.Containers) != 1 || v.State == nil {
			t.Errorf("%s: %d containers, state %v; want 1 and a state", v.RepoPath, len(v.Containers), v.State)
		}
	}
	want := []string{repoA, repoB}
	slices.Sort(want)
	if !slices.Equal(repos, want) {
		t.Errorf("List repos = %v, want %v sorted", repos, want)
	}
}
