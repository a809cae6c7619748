package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/state"
)

// limitingProvider answers like the Anthropic Messages API, but its first
// limited calls get 429 with retry-after; held makes the first ones wait
// until that many calls arrived (so that containers hit the limit at once).
type limitingProvider struct {
	limited, held int
	retryAfter    string
	mu            sync.Mutex
	calls         int
	arrived       chan struct{} // closed when held calls arrived
}

func (p *limitingProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.calls++
	n := p.calls
	if n == p.held {
		close(p.arrived)
	}
	p.mu.Unlock()
	if n <= p.held {
		select {
		case <-p.arrived:
		case <-time.After(2 * time.Minute):
		}
	}
	if n <= p.limited {
		w.Header().Set("Retry-After", p.retryAfter)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":10,"output_tokens":20}}`)
}

func (p *limitingProvider) seen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// limitRepo is a repository with one single-story task file per name and
// the model agent (runner/internal/modelagent, built for the sandbox)
// committed beside them.
func limitRepo(t *testing.T, names ...string) string {
	t.Helper()
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), taskFileJSON("feat/"+n, 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(repo, "modelagent"), "github.com/aimi-tools/swarm/runner/internal/modelagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the model agent: %v\n%s", err, out)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files and the model agent")
	removeProjectContainersAtEnd(t, repo)
	return repo
}

// startLimitDaemon starts the real daemon in local git mode with the
// sandbox image, the model agent, a model key for up and limitRetries.
func startLimitDaemon(t *testing.T, up string, limitRetries int, extra ...string) (*proc, string) {
	t.Helper()
	image := sandboxImage(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIMI_") {
			env = append(env, kv)
		}
	}
	cfg := fmt.Sprintf("agent:\n  kind: acp\n  command: ./modelagent\n  limit_retries: %d\n  env:\n    ANTHROPIC_API_KEY: sk-ant-limit-test\ngit:\n  mode: local\n", limitRetries)
	settings := []string{"AIMI_MODELS_ANTHROPIC_URL=" + up, "AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m", "AIMI_SANDBOX_SWAP=256m",
		"AIMI_SANDBOX_CPUS=0.5", "AIMI_SANDBOX_PIDS=128", "AIMI_SWARM_STOP_GRACE=2s"}
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   cfg,
		LogLevel: "debug",
		Base:     env,
		Env:      append(settings, extra...),
	})
	return p, sock
}

// runLimitSwarm starts repo's swarm on the daemon of sock and waits
// until its containers exited.
func runLimitSwarm(t *testing.T, sock, repo string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 5*time.Minute, "the containers exited", allExited)
}

// limitJournal checks that the container of name completed its story
// without a failure, and that its journal holds the wait for the limit
// and the resumption; it returns how many waits it holds.
func limitJournal(t *testing.T, repo string, sw *state.Swarm, name string) int {
	t.Helper()
	c := containerOf(t, sw, name)
	if c.Status != state.StatusCompleted || c.StoryProgress.Completed != 1 || c.StoryProgress.Failed != 0 {
		t.Errorf("container %s: %s, %+v; want completed 1/1, none failed", name, c.Status, c.StoryProgress)
	}
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	waits, resumes := 0, 0
	for _, r := range recs {
		m := string(r.Message)
		if r.Type != "progress-update" {
			continue
		}
		if strings.Contains(m, `"failed"`) {
			t.Errorf("%s: a story failed: %s", name, m)
		}
		if strings.Contains(m, "waiting for anthropic limit until") && strings.Contains(m, "model call failed: 429") {
			waits++
		}
		if strings.Contains(m, "the anthropic limit reset at") && strings.Contains(m, "resuming the story in the same session (session/load)") {
			resumes++
		}
	}
	if waits == 0 || resumes != waits {
		for _, r := range recs {
			t.Logf("%s seq=%d stream=%s type=%s message=%s", name, r.Seq, r.Stream, r.Type, r.Message)
		}
		t.Errorf("%s: %d waits and %d resumptions in the journal, want as many of each and at least one", name, waits, resumes)
	}
	return waits
}

// TestLimitedStoryIsRetriedAfterTheResetThroughTheDaemon: the real
// daemon and engine, the real runner in the sandbox image, an ACP agent
// that calls the model through the gateway and ends its turn in error on
// a non-2xx answer, and a provider that answers 429 with retry-after to
// the first two calls. No story fails; the journal has the waits and the
// resumptions.
func TestLimitedStoryIsRetriedAfterTheResetThroughTheDaemon(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs a real container")
	}
	prov := &limitingProvider{limited: 2, retryAfter: "3", arrived: make(chan struct{})}
	up := httptest.NewServer(prov)
	t.Cleanup(up.Close)
	name := "limit-" + fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name())))[:6]
	repo := limitRepo(t, name)
	p, sock := startLimitDaemon(t, up.URL, 5)
	runLimitSwarm(t, sock, repo)
	p.stop(t)
	if waits := limitJournal(t, repo, validState(t, repo), name); waits != 2 {
		t.Errorf("%d waits journaled, want 2 (one per limited call)", waits)
	}
	if n := prov.seen(); n != 3 {
		t.Errorf("the provider saw %d calls, want 3", n)
	}
}

// TestTwoContainersLimitedAtOnceBothFinish: two containers whose calls
// the provider limits at once (both held until both arrived, then 429),
// with agent.limit_retries 1: each waits for the reset without spending
// more than its one retry, and both stories complete.
func TestTwoContainersLimitedAtOnceBothFinish(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	prov := &limitingProvider{limited: 2, held: 2, retryAfter: "3", arrived: make(chan struct{})}
	up := httptest.NewServer(prov)
	t.Cleanup(up.Close)
	h := fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name())))[:6]
	a, b := "lima-"+h, "limb-"+h
	repo := limitRepo(t, a, b)
	p, sock := startLimitDaemon(t, up.URL, 1)
	runLimitSwarm(t, sock, repo)
	p.stop(t)
	sw := validState(t, repo)
	for _, n := range []string{a, b} {
		if waits := limitJournal(t, repo, sw, n); waits != 1 {
			t.Errorf("%s: %d waits journaled, want 1", n, waits)
		}
	}
	if n := prov.seen(); n != 4 {
		t.Errorf("the provider saw %d calls, want 4", n)
	}
}

// TestLimitLongerThanTheTimeoutPausesTheContainer: a limit that resets
// after the container's swarm.timeout (100 s against 90 s) does not end
// it: the time the limit held it does not count, the runner waits for the
// reset and the story completes. The timeout is as long as it can be
// below the limit's wait: what it must cover beside the wait (the clone
// and the agent's start before the first call, the story after the
// reset) takes tens of seconds on a loaded machine.
func TestLimitLongerThanTheTimeoutPausesTheContainer(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs a real container")
	}
	prov := &limitingProvider{limited: 1, retryAfter: "100", arrived: make(chan struct{})}
	up := httptest.NewServer(prov)
	t.Cleanup(up.Close)
	name := "limlong-" + fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name())))[:6]
	repo := limitRepo(t, name)
	p, sock := startLimitDaemon(t, up.URL, 5, "AIMI_SWARM_TIMEOUT=90s")
	runLimitSwarm(t, sock, repo)
	logs := p.logs()
	p.stop(t)
	if waits := limitJournal(t, repo, validState(t, repo), name); waits != 1 {
		t.Errorf("%d waits journaled, want 1", waits)
	}
	if !strings.Contains(logs, "timeout put off: provider limits held the container's model calls") {
		t.Errorf("the daemon's log does not say the timeout was put off")
	}
}
