package runner

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/tasks"
)

// dirSize is the total size of the regular files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCloneTakesOnlyTheBranchTip(t *testing.T) {
	const historyBytes = 12 << 20
	cases := []struct {
		name string
		file func(*testing.T) *tasks.File
		// existing: the branch is on the server already (a resume), with
		// the large history of its own; else it starts from main's.
		existing bool
	}{
		{"a new branch starts from main's tip without main's history", oneStory, false},
		{"an existing branch is resumed from its tip without its history", oneStory, true},
		{"concurrent stories in worktrees commit and push on a tip-only clone", twoRoots, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.file(t)
			s := newScenario(t, f, "tok-shallow-0123456789")
			bare := s.srv.Bare
			history := "main"
			if tc.existing {
				gittest.Git(t, bare, "branch", s.branch, "main")
				history = s.branch
			}
			gittest.AddHistory(t, bare, history, 6, historyBytes/6)
			before := gittest.Git(t, bare, "rev-parse", "refs/heads/"+history)

			_, msgs := runScenario(t, context.Background(), s, s.request(t))
			if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
				t.Fatalf("completion %+v", c)
			}
			if got := dirSize(t, filepath.Join(s.cfg.Workspace, ".git")); got > historyBytes/4 {
				t.Errorf("the workspace's .git holds %d bytes: the clone took the history (%d bytes)", got, historyBytes)
			}
			// The branch on the server: the stories' commits (one per story
			// plus the task-file updates) directly on top of where it was.
			if base := gittest.Git(t, bare, "merge-base", before, "refs/heads/"+s.branch); base != before {
				t.Errorf("the pushed branch does not descend from %s (merge-base %s)", before, base)
			}
			if got := finalStatuses(t, s); len(got) != len(f.UserStories) {
				t.Errorf("statuses %v", got)
			}
			for id, st := range finalStatuses(t, s) {
				if st != tasks.Completed {
					t.Errorf("%s is %s", id, st)
				}
			}
		})
	}
}

// uploadSessions counts the git commands that read from the server (each
// starts with the upload-pack ref advertisement): ls-remote and clone.
func uploadSessions(reqs []string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r, "GET ") && strings.HasSuffix(r, "/info/refs?service=git-upload-pack") {
			n++
		}
	}
	return n
}

// TestCloneFollowsTheBranchHint: told by the task-request whether the
// branch exists, the runner clones the right ref at once (one session at
// the repository, no ls-remote); without the hint it asks first, as
// before; a wrong "exists" costs the asking, not the run. Either way the
// branch pushed descends from where it was (a resume) or from main.
func TestCloneFollowsTheBranchHint(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name     string
		existing bool
		hint     *bool
		sessions int
	}{
		{"a new branch with the hint", false, &no, 1},
		{"an existing branch with the hint", true, &yes, 1},
		{"a new branch without the hint asks first", false, nil, 2},
		{"an existing branch without the hint asks first", true, nil, 2},
		{"a wrong hint falls back to asking", false, &yes, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, oneStory(t), "tok-hint-0123456789")
			bare := s.srv.Bare
			base := "main"
			if tc.existing {
				gittest.Git(t, bare, "branch", s.branch, "main")
				gittest.AddHistory(t, bare, s.branch, 1, 16)
				base = s.branch
			}
			before := gittest.Git(t, bare, "rev-parse", "refs/heads/"+base)
			_, msgs := runScenario(t, context.Background(), s, s.requestWith(t, func(p *acpmsg.TaskRequest) { p.BranchExists = tc.hint }))
			if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
				t.Fatalf("completion %+v", c)
			}
			reqs := s.srv.Requests()
			if got := uploadSessions(reqs); got != tc.sessions {
				t.Errorf("%d sessions read from the repository, want %d:\n%s", got, tc.sessions, strings.Join(reqs, "\n"))
			}
			if base := gittest.Git(t, bare, "merge-base", before, "refs/heads/"+s.branch); base != before {
				t.Errorf("the pushed branch does not descend from %s (merge-base %s)", before, base)
			}
			if got := gittest.Git(t, s.cfg.Workspace, "config", "--get", "remote.origin.url"); got != s.srv.URL {
				t.Errorf("origin is %q, want the repository's own URL %q", got, s.srv.URL)
			}
		})
	}
}
