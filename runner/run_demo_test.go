package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// demoRunCase is one case of TestRunWithDemoAgent: a fixture, changed by
// mutate, run with verify as the verify command.
type demoRunCase struct {
	name       string
	fixture    string
	mutate     func(f *tasks.File)
	verify     string
	want       map[string]tasks.Status
	wantOrder  []string // order of in_progress, when it is fixed
	wantErrors []string // substrings of completion errors
	wantFiles  []string
}

func TestRunWithDemoAgent(t *testing.T) {
	for _, tc := range demoRunCases() {
		t.Run(tc.name, func(t *testing.T) { checkDemoRun(t, tc) })
	}
}

// demoRunCases are TestRunWithDemoAgent's cases.
func demoRunCases() []demoRunCase {
	return []demoRunCase{
		{
			name: "diamond runs every story after its dependencies, two at a time", fixture: diamond,
			want:      map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.Completed, "US-003": tasks.Completed, "US-004": tasks.Completed},
			wantFiles: []string{"step-1.txt", "step-2.txt", "step-3.txt", "step-4.txt"},
		},
		{
			name: "linear chain runs one story at a time in order", fixture: linear,
			want:      map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.Completed, "US-003": tasks.Completed},
			wantOrder: []string{"US-001", "US-002", "US-003"},
			wantFiles: []string{"step-1.txt", "step-2.txt", "step-3.txt"},
		},
		{
			name: "a failed story leaves its dependents skipped and the others run", fixture: diamond,
			mutate:     func(f *tasks.File) { f.UserStories[1].Notes = "[demo:fail]" },
			want:       map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.Failed, "US-003": tasks.Completed, "US-004": tasks.Skipped},
			wantErrors: []string{"US-002: the agent refused"},
		},
		{
			name: "a failing verify command fails the story and skips the chain behind it", fixture: linear,
			verify:     "echo checked; test -f step-2.txt",
			want:       map[string]tasks.Status{"US-001": tasks.Failed, "US-002": tasks.Skipped, "US-003": tasks.Skipped},
			wantErrors: []string{"US-001: verify failed"},
		},
		{
			name: "resume: a story skipped before the run satisfies its dependents", fixture: "2026-11-20-resume-tasks.json",
			want:      map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.Skipped, "US-003": tasks.Completed, "US-004": tasks.Completed},
			wantOrder: []string{"US-003", "US-004"},
		},
		{
			name: "a rerun retries the failed story and reopens those skipped behind it", fixture: linear,
			mutate: func(f *tasks.File) {
				f.UserStories[0].Status, f.UserStories[1].Status, f.UserStories[2].Status = tasks.Completed, tasks.Failed, tasks.Skipped
			},
			want:      map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.Completed, "US-003": tasks.Completed},
			wantOrder: []string{"US-002", "US-003"},
		},
		{
			name: "stories completed or skipped before the run are left alone", fixture: linear,
			mutate:    func(f *tasks.File) { f.UserStories[0].Status = tasks.Completed },
			want:      map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.Completed, "US-003": tasks.Completed},
			wantOrder: []string{"US-002", "US-003"},
		},
	}
}

// checkDemoRun runs tc's scenario with the demo agent and checks the
// completion, the progress reports, the task file and the branch.
func checkDemoRun(t *testing.T, tc demoRunCase) {
	f := fixture(t, tc.fixture)
	if tc.mutate != nil {
		tc.mutate(f)
	}
	s := newScenario(t, f, "")
	s.cfg.VerifyCommand = tc.verify
	code, msgs := runScenario(t, context.Background(), s, s.request(t))
	c := completionOf(t, msgs)
	if c.Status != acpmsg.CompletionCompleted || code != ExitOK {
		t.Fatalf("completion %+v exit %d", c, code)
	}
	ps := progressOf(msgs)
	limit := f.Metadata.MaxConcurrency
	checkOrder(t, f, ps, limit)
	checkDemoProgress(t, tc, ps)
	checkDemoStatuses(t, tc, s, ps)
	checkDemoErrors(t, tc, c.Errors)
	for _, p := range tc.wantFiles {
		if !strings.Contains(s.srv.Show(t, s.branch, p), "demo agent") {
			t.Errorf("%s not pushed", p)
		}
	}
	checkDemoCommits(t, s, ps)
}

// checkDemoProgress checks the order stories started in, when tc fixes it,
// and that every finished story's summary says something.
func checkDemoProgress(t *testing.T, tc demoRunCase, ps []progress) {
	t.Helper()
	var order []string
	for _, p := range ps {
		t.Logf("progress %s %s: %s", p.story, p.status, p.output)
		if p.status == acpmsg.StoryInProgress {
			order = append(order, p.story)
		}
		if (p.status == acpmsg.StoryCompleted || p.status == acpmsg.StoryFailed) && len(p.output) < 40 {
			t.Errorf("%s %s: summary too thin: %q", p.story, p.status, p.output)
		}
	}
	if tc.wantOrder != nil && strings.Join(order, ",") != strings.Join(tc.wantOrder, ",") {
		t.Errorf("start order %v want %v", order, tc.wantOrder)
	}
}

// checkDemoStatuses checks the task file on the branch has tc's statuses and
// the last reported status of each story matches the file.
func checkDemoStatuses(t *testing.T, tc demoRunCase, s *scenario, ps []progress) {
	t.Helper()
	last := map[string]string{}
	for _, p := range ps {
		last[p.story] = p.status
	}
	got := finalStatuses(t, s)
	for id, want := range tc.want {
		if got[id] != want {
			t.Errorf("task file on the branch: %s is %s, want %s", id, got[id], want)
		}
		if l, ok := last[id]; ok && l != string(want) {
			t.Errorf("last progress-update of %s is %s, want %s", id, l, want)
		}
	}
}

// checkDemoErrors checks the completion's errors hold tc's, and are none
// when tc wants none.
func checkDemoErrors(t *testing.T, tc demoRunCase, got []string) {
	t.Helper()
	errs := strings.Join(got, "\n")
	for _, w := range tc.wantErrors {
		if !strings.Contains(errs, w) {
			t.Errorf("completion errors %q lack %q", got, w)
		}
	}
	if tc.wantErrors == nil && len(got) != 0 {
		t.Errorf("unexpected completion errors %q", got)
	}
}

// checkDemoCommits checks the branch has one commit per finished story on
// top of the initial one (skips ride along in one extra commit).
func checkDemoCommits(t *testing.T, s *scenario, ps []progress) {
	t.Helper()
	log := s.srv.Log(t, s.branch)
	finishedStories := 0
	for _, p := range ps {
		if p.status == acpmsg.StoryCompleted || p.status == acpmsg.StoryFailed {
			finishedStories++
		}
	}
	storyCommits := 0
	for _, l := range log {
		if strings.HasPrefix(l, "US-") {
			storyCommits++
		}
	}
	if storyCommits != finishedStories {
		t.Errorf("branch has %d story commits for %d finished stories: %q", storyCommits, finishedStories, log)
	}
}
