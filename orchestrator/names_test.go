package orchestrator

import (
	"context"
	"os/exec"
	"path"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/tasks"
)

func TestCheckTaskPath(t *testing.T) {
	cases := []struct {
		name, path string
		ok         bool
	}{
		{"a tasks file under .aimi/tasks is accepted", ".aimi/tasks/2026-03-01-auth-tasks.json", true},
		{"a plain .json under .aimi/tasks is accepted", ".aimi/tasks/sub/x.json", true},
		{"empty is refused", "", false},
		{"absolute is refused", "/repo/.aimi/tasks/a.json", false},
		{"dot-dot is refused", ".aimi/tasks/../../etc/a.json", false},
		{"unclean path is refused", ".aimi/tasks//a.json", false},
		{"dot segment is refused", "./.aimi/tasks/a.json", false},
		{"outside the tasks dir is refused", ".aimi/a.json", false},
		{"prefix lookalike is refused", ".aimi/tasksx/a.json", false},
		{"other suffix is refused", ".aimi/tasks/a.yaml", false},
		{"backslash is refused", ".aimi\\tasks\\a.json", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkTaskPath(tc.path)
			if (err == nil) != tc.ok {
				t.Errorf("checkTaskPath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
			}
		})
	}
}

func TestContainerName(t *testing.T) {
	cases := []struct{ in, want string }{
		{".aimi/tasks/2026-03-01-auth-tasks.json", "aimi-2026-03-01-auth"},
		{".aimi/tasks/feature.json", "aimi-feature"},
		{".aimi/tasks/ünïcode spaces.json", "aimi-n-code-spaces"},
		{".aimi/tasks/---.json", "aimi-task"},
		{".aimi/tasks/" + strings.Repeat("a", 300) + ".json", "aimi-" + strings.Repeat("a", 100)},
	}
	for _, tc := range cases {
		if got := containerName(tc.in); got != tc.want || !nameRe.MatchString(got) {
			t.Errorf("containerName(%q) = %q, want %q matching %s", tc.in, got, tc.want, nameRe)
		}
	}
	taken := map[string]bool{"aimi-x": true, "aimi-x-2": true}
	if got := uniqueName("aimi-x", func(n string) bool { return taken[n] }); got != "aimi-x-3" {
		t.Errorf("uniqueName = %q, want aimi-x-3", got)
	}
}

// FuzzTaskPath: whatever a client sends, an accepted path stays inside
// .aimi/tasks/ and the container name made from it is valid.
func FuzzTaskPath(f *testing.F) {
	for _, s := range []string{".aimi/tasks/a-tasks.json", "../x.json", ".aimi/tasks/../a.json", "/abs.json", ".aimi/tasks/ä b.json", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if n := containerName(p); !nameRe.MatchString(n) || len(n) > 128 {
			t.Fatalf("containerName(%q) = %q is not a valid name", p, n)
		}
		if checkTaskPath(p) != nil {
			return
		}
		if !strings.HasPrefix(p, tasksDir) || strings.Contains(p, "..") && path.Clean(p) != p || path.IsAbs(p) || !strings.HasSuffix(p, ".json") {
			t.Fatalf("accepted %q", p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." || seg == "." {
				t.Fatalf("accepted %q with segment %q", p, seg)
			}
		}
	})
}

func TestDecide(t *testing.T) {
	done := map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.Skipped}
	open := map[string]tasks.Status{"US-001": tasks.Completed, "US-002": tasks.InProgress}
	cases := []struct {
		name    string
		facts   exitFacts
		stories map[string]tasks.Status
		typ     acpmsg.Type
		code    string
	}{
		{"a vanished container is lost", exitFacts{missing: true}, open, acpmsg.TypeError, CodeContainerLost},
		{"a stop wins over the exit code", exitFacts{stopped: true, exited: true, code: 137}, open, acpmsg.TypeCompletion, acpmsg.CompletionStopped},
		{"a node lost is the engine's code, not an exit code", exitFacts{exited: true, code: 0, failure: "NODE_LOST", failureReason: "node w1 is down"}, open, acpmsg.TypeError, "NODE_LOST"},
		{"a stop wins over a lost node", exitFacts{stopped: true, failure: "NODE_LOST"}, open, acpmsg.TypeCompletion, acpmsg.CompletionStopped},
		{"a timeout is CONTAINER_TIMEOUT", exitFacts{timedOut: true, exited: true, code: 137}, open, acpmsg.TypeError, acpmsg.CodeContainerTimeout},
		{"OOM is CONTAINER_OOM", exitFacts{oom: true, exited: true, code: 137}, open, acpmsg.TypeError, acpmsg.CodeContainerOOM},
		{"a non-zero exit is AGENT_CRASH", exitFacts{exited: true, code: 3}, done, acpmsg.TypeError, acpmsg.CodeAgentCrash},
		{"exit 0 with stories open is AGENT_CRASH", exitFacts{exited: true}, open, acpmsg.TypeError, acpmsg.CodeAgentCrash},
		{"exit 0 with every story done is completed", exitFacts{exited: true}, done, acpmsg.TypeCompletion, acpmsg.CompletionCompleted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ, code, msg := decide(tc.facts, tc.stories)
			if typ != tc.typ || code != tc.code || msg == "" {
				t.Errorf("decide = %s %s %q, want %s %s", typ, code, msg, tc.typ, tc.code)
			}
		})
	}
}

func TestClassifyFollowsTheReconciliationTable(t *testing.T) {
	cases := []struct {
		name    string
		info    engine.Info
		found   bool
		mode    supMode
		stopped bool
		missing bool
	}{
		{"missing container is a zombie", engine.Info{}, false, 0, false, true},
		{"running is re-attached", engine.Info{Status: "running", Running: true}, true, modeAttach, false, false},
		{"paused is stopped", engine.Info{Status: "paused", Running: true}, true, 0, true, false},
		{"removing is stopped", engine.Info{Status: "removing"}, true, 0, true, false},
		{"created waits for a slot", engine.Info{Status: "created"}, true, modeFresh, false, false},
		{"exited is caught up and decided", engine.Info{Status: "exited", ExitCode: 1}, true, modeFinish, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode, facts := classify(tc.info, tc.found)
			if tc.stopped || tc.missing {
				if facts == nil || facts.stopped != tc.stopped || facts.missing != tc.missing {
					t.Fatalf("facts %+v, want stopped=%v missing=%v", facts, tc.stopped, tc.missing)
				}
				return
			}
			if facts != nil || mode != tc.mode {
				t.Errorf("mode %v facts %+v, want mode %v", mode, facts, tc.mode)
			}
		})
	}
}

func TestOriginURL(t *testing.T) {
	cases := []struct{ origin, want string }{
		{"https://github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"git@github.com:org/repo.git", "ssh://git@github.com/org/repo.git"},
		{"https://user:ghp_SECRET@github.com/org/repo.git", "https://user@github.com/org/repo.git"},
	}
	for _, tc := range cases {
		repo, _ := testRepo(t, nil, 1)
		if out, err := exec.Command("git", "-C", repo, "remote", "set-url", "origin", tc.origin).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got, err := originURL(context.Background(), repo)
		if err != nil || got != tc.want {
			t.Errorf("originURL(%q) = %q, %v; want %q", tc.origin, got, err, tc.want)
		}
	}
	for _, bad := range []string{"http://github.com/org/repo.git", "/srv/git/repo.git"} {
		repo, _ := testRepo(t, nil, 1)
		exec.Command("git", "-C", repo, "remote", "set-url", "origin", bad).Run()
		if _, err := originURL(context.Background(), repo); err == nil {
			t.Errorf("origin %q accepted; the runner would refuse it", bad)
		}
	}
	repo, _ := testRepo(t, nil, 1)
	exec.Command("git", "-C", repo, "remote", "remove", "origin").Run()
	if _, err := originURL(context.Background(), repo); err == nil || !strings.Contains(err.Error(), "--local") {
		t.Errorf("no origin: %v, want an error suggesting --local", err)
	}
}
