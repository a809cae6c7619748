package runner

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitserve"
)

type heardAsks struct {
	mu      sync.Mutex
	callers []contract.Caller
}

func (h *heardAsks) ServeAsk(w http.ResponseWriter, r *http.Request, from contract.Caller) {
	h.mu.Lock()
	h.callers = append(h.callers, from)
	h.mu.Unlock()
	_ = json.NewEncoder(w).Encode(contract.AskAnswer{State: contract.AskAnswered, OptionID: "yes"})
}

// TestAskThroughTheLocalGitService: without an ask socket (Swarm mode)
// the runner asks through the local-mode git service, over TLS with the
// daemon's CA and the container's token, and the service hands the
// request on in that container's name; a wrong token reaches nobody.
func TestAskThroughTheLocalGitService(t *testing.T) {
	ctx := t.Context()
	repo := filepath.Join(t.TempDir(), "repo")
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"-C", repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := gitserve.New(gitserve.Options{DataDir: filepath.Join(t.TempDir(), "data"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-a", Branch: "feat/a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	heard := &heardAsks{}
	s.SetAsks(heard)
	q := acpclient.Question{Title: "Write a.md", Kind: "edit", Options: []contract.AskOption{{ID: "yes", Kind: "allow_once"}}}
	ch, err := openAskChannel("", g.RepoURL, g.Token, g.CAFile, true, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if opt, err := ch.forStory("US-001").Ask(context.Background(), q); err != nil || opt != "yes" {
		t.Fatalf("answer %q %v, want yes", opt, err)
	}
	heard.mu.Lock()
	if len(heard.callers) != 1 || heard.callers[0].Container != "aimi-a" || heard.callers[0].SwarmID != "sw1" || heard.callers[0].RepoPath != repo {
		t.Errorf("the inbox heard %+v, want aimi-a of sw1 in %s", heard.callers, repo)
	}
	heard.mu.Unlock()
	bad, err := openAskChannel("", g.RepoURL, "not-the-token", g.CAFile, true, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.forStory("US-001").Ask(context.Background(), q); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("a wrong token: %v, want the service's 401", err)
	}
}
