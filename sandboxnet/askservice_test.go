package sandboxnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/inbox"
	"github.com/aimi-tools/swarm/orchestrator"
)

// askOver posts one permission request (runner id id) on the ask socket
// of a sandbox's socket directory dir; it returns the status.
func askOver(ctx context.Context, dir, path, id string) (int, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, contract.AskSocket+".sock"))
	}}
	defer tr.CloseIdleConnections()
	body, _ := json.Marshal(contract.AskRequest{ID: id, StoryID: "US-001", AskedAt: time.Now().UTC().Format(time.RFC3339Nano),
		Question: contract.AskQuestion{Title: "Write a.md", Kind: "edit", Options: []contract.AskOption{{ID: "yes", Name: "Allow", Kind: "allow_once"}, {ID: "no", Name: "Reject", Kind: "reject_once"}}}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandbox"+path, bytes.NewReader(body))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestAskSocketSaysWhoAsksAndBoundsAFlood: with a policy that asks, each
// sandbox gets an ask socket (in AIMI_NET_FORWARD); a request on it is
// taken in the name of the socket's container and repository (nothing in
// the request says who asks); before the inbox exists it gets 503; a
// container's flood past its bound gets 429 and one journal line while
// another container's request is still taken.
func TestAskSocketSaysWhoAsksAndBoundsAFlood(t *testing.T) {
	t.Parallel()
	cfg := &configs.Config{}
	cfg.Agent.PermissionPolicy = "ask-kinds:edit"
	n, err := New(Options{Config: cfg, DataDir: shortDir(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.CloseAll)
	repo := shortDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	flood, err := n.Open(ctx, orchestrator.NetSandbox{SwarmID: "sw1", Container: "aimi-flood", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := n.Open(ctx, orchestrator.NetSandbox{SwarmID: "sw1", Container: "aimi-quiet", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	if env := strings.Join(flood.Env, " "); !strings.Contains(env, fmt.Sprintf("%d=%s", contract.AskPort, contract.AskSocket)) {
		t.Errorf("the sandbox's environment has no ask forward: %s", env)
	}
	if code, err := askOver(ctx, flood.Dir, contract.AskPath, "00000000000000aa"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("before the inbox: HTTP %d %v, want 503", code, err)
	}
	var mu sync.Mutex
	var journal []string
	in := inbox.New(inbox.Config{MaxPerContainer: 3, Journal: func(_ context.Context, sb contract.Sandbox, text string) {
		mu.Lock()
		journal = append(journal, sb.Swarm+"/"+sb.Container+": "+text)
		mu.Unlock()
	}})
	n.SetAsks(in)
	held, stop := context.WithCancel(ctx)
	defer stop()
	for i := range 3 {
		go askOver(held, flood.Dir, contract.AskPath, fmt.Sprintf("%016x", i))
	}
	waitPendingList(t, in, repo, 3)
	for i := range 20 {
		if code, err := askOver(ctx, flood.Dir, contract.AskPath, fmt.Sprintf("%016x", 100+i)); err != nil || code != http.StatusTooManyRequests {
			t.Fatalf("request %d past the bound: HTTP %d %v, want 429", i, code, err)
		}
	}
	if code, err := askOver(ctx, flood.Dir, "/other", "00000000000000bb"); err != nil || code != http.StatusNotFound {
		t.Errorf("another path: HTTP %d %v, want 404", code, err)
	}
	go askOver(held, quiet.Dir, contract.AskPath, "00000000000000cc")
	reqs := waitPendingList(t, in, repo, 4)
	byCtr := map[string]int{}
	for _, r := range reqs {
		if r.SwarmID != "sw1" || r.RepoPath != repo {
			t.Errorf("request %+v: want swarm sw1 and repository %s", r, repo)
		}
		byCtr[r.ContainerName]++
	}
	if byCtr["aimi-flood"] != 3 || byCtr["aimi-quiet"] != 1 {
		t.Errorf("requests by container: %v", byCtr)
	}
	mu.Lock()
	defer mu.Unlock()
	if j := strings.Join(journal, "\n"); strings.Count(j, "refused") != 1 || !strings.Contains(j, "sw1/aimi-flood: ") {
		t.Errorf("want one refusal line in aimi-flood's journal:\n%s", j)
	}
}

// shortDir is a temp dir with a short path (unix socket paths: 108 bytes).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sbnet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	d, _ = filepath.EvalSymlinks(d)
	return d
}

func waitPendingList(t *testing.T, in *inbox.Inbox, repo string, n int) []api.PermissionRequest {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if l := in.List(repo); len(l) == n {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d pending of %s, have %+v", n, repo, in.List(""))
		}
	}
}
