package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/board"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

var boardURLRe = regexp.MustCompile(`board: (http://127\.0\.0\.1:\d+)/#token=([A-Za-z0-9_-]{43})\n`)

// startUI runs `aimi swarm ui` with args until the test ends and returns
// the board's origin and token.
func startUI(t *testing.T, args ...string) (base, token string, out *syncBuffer, stop func() result) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &syncBuffer{}
	done := make(chan result, 1)
	go func() { done <- runAimi(ctx, nil, out, append([]string{"swarm", "ui", "--no-open"}, args...)...) }()
	stopped := false
	var r result
	stop = func() result {
		if !stopped {
			stopped = true
			cancel()
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ui did not stop when interrupted")
			}
		}
		return r
	}
	t.Cleanup(func() { stop() })
	var m []string
	testwait.Eventually(t, 10*time.Second, "the board URL printed", func() error {
		if m = boardURLRe.FindStringSubmatch(out.String()); m == nil {
			return fmt.Errorf("printed %q", out.String())
		}
		return nil
	}, testwait.Every(20*time.Millisecond))
	return m[1], m[2], out, stop
}

// boardDo sends one request to the board, with the token header when given.
func boardDo(t *testing.T, method, u, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if token != "" {
		req.Header.Set(board.TokenHeader, token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSwarmUIServesTheBoardUntilInterrupted(t *testing.T) {
	fake := &daemontest.Swarms{ListFunc: func() []api.SwarmView { return []api.SwarmView{daemontest.View("/repo")} }}
	sock, _ := daemontest.Serve(t, fake)
	base, token, _, stop := startUI(t, "--socket", sock)
	if code, body := boardDo(t, "GET", base+"/api/swarms", token, ""); code != 200 || !strings.Contains(body, `"repo":"/repo"`) {
		t.Fatalf("swarms through the board: %d %s", code, body)
	}
	if code, _ := boardDo(t, "GET", base+"/api/swarms", "", ""); code != http.StatusForbidden {
		t.Errorf("without the token: %d, want 403", code)
	}
	if r := stop(); r.code != 0 {
		t.Errorf("ui after Ctrl-C: exit %d %s", r.code, r.err)
	}
}

// TestSwarmUITakesRepo: --repo, as for every swarm subcommand; the board
// then shows and acts on that repository's swarm only.
func TestSwarmUITakesRepo(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".aimi"), 0o755); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	fake := &daemontest.Swarms{
		ListFunc: func() []api.SwarmView { return []api.SwarmView{daemontest.View(repo), daemontest.View("/other")} },
		StopFunc: func(r string, _ []string) (api.SwarmView, error) { return daemontest.View(r), nil },
	}
	sock, _ := daemontest.Serve(t, fake)
	base, token, out, _ := startUI(t, "--socket", sock, "--repo", filepath.Join(dir, ".aimi"))
	if !strings.Contains(out.String(), "showing only the swarm of "+repo) {
		t.Errorf("ui --repo printed %q, want the repository it shows", out.String())
	}
	code, body := boardDo(t, "GET", base+"/api/swarms", token, "")
	if code != 200 || !strings.Contains(body, `"repo":"`+repo+`"`) || strings.Contains(body, "/other") {
		t.Fatalf("swarms through ui --repo: %d %s, want %s only", code, body, repo)
	}
	if code, _ := boardDo(t, "POST", base+"/api/stop", token, `{"repo":"/other"}`); code != http.StatusNotFound {
		t.Errorf("stop of another repository's swarm: %d, want 404", code)
	}
	if code, body := boardDo(t, "POST", base+"/api/stop", token, `{"repo":"`+repo+`"}`); code != 200 {
		t.Errorf("stop of the board's repository: %d %s", code, body)
	}
	stops := 0
	for _, c := range fake.Calls() {
		if strings.HasPrefix(c, "stop") {
			stops++
		}
	}
	if stops != 1 {
		t.Errorf("the daemon got %d stops (%v), want 1", stops, fake.Calls())
	}
}

func TestSwarmUIRefusesANonLoopbackAddressAndAMissingDaemon(t *testing.T) {
	sock, _ := daemontest.Serve(t, &daemontest.Swarms{})
	if r := runAimi(context.Background(), nil, nil, "swarm", "ui", "--socket", sock, "--no-open", "--listen", "0.0.0.0:0"); r.code != ExitUsage || !strings.Contains(r.err, "loopback") {
		t.Errorf("--listen 0.0.0.0:0: exit %d %q, want %d and a loopback-only message", r.code, r.err, ExitUsage)
	}
	missing := filepath.Join(daemontest.ShortTempDir(t), "none.sock")
	if r := runAimi(context.Background(), nil, nil, "swarm", "ui", "--socket", missing, "--no-open"); r.code != ExitDaemon {
		t.Errorf("no daemon: exit %d %q, want %d", r.code, r.err, ExitDaemon)
	}
}
