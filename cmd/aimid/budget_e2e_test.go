package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// budgetAgent is an ACP agent in sh whose every turn makes one call to
// the model through the gateway (git is the sandbox's only HTTP client:
// ls-remote sends a GET with the placeholder key and reads the fake
// provider's JSON answer; GIT_SSL_CAINFO, origin's CA in remote mode,
// gives way to the trust store) and then ends the turn.
const budgetAgent = `#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | grep -o '"id":[0-9]*' | head -n 1 | cut -d: -f2)
  case "$line" in
  *'"method":"initialize"'*) echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":1,"agentCapabilities":{}}}' ;;
  *'"method":"session/new"'*) echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"sessionId":"s1"}}' ;;
  *'"method":"session/prompt"'*)
    GIT_TERMINAL_PROMPT=0 GIT_SSL_CAINFO="$SSL_CERT_FILE" git -c http.extraHeader="x-api-key: $ANTHROPIC_API_KEY" -c http.sslCAInfo="$SSL_CERT_FILE" \
      ls-remote "$ANTHROPIC_BASE_URL/v1/messages" >/dev/null 2>&1 </dev/null
    date +%s%N >> work.txt
    echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"stopReason":"end_turn"}}' ;;
  esac
done
`

// budgetConfig is the daemon's config with swarm.budget and
// agent.story_budget: one call of the fake provider costs 3 (a million
// input tokens at 3).
func budgetConfig(swarmBudget, storyBudget string) string {
	return "agent:\n  kind: acp\n  command: sh budget-agent.sh\n  story_budget: " + storyBudget + "\n  env:\n    ANTHROPIC_API_KEY: sk-ant-budget-test\n" +
		"git:\n  mode: local\nswarm:\n  budget: " + swarmBudget + "\n" +
		"models:\n  anthropic:\n    prices: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}\n"
}

// budgetRun is one swarm of two stories whose agent calls a fake
// provider through the model gateway.
type budgetRun struct {
	repo, sock, dataDir, name, branch string
	calls                             *atomic.Int32
	p                                 *proc
}

// startBudgetSwarm serves the fake provider, makes the repository, starts
// the daemon with cfg and the swarm.
func startBudgetSwarm(t *testing.T, ctx context.Context, cfg string) *budgetRun {
	return startBudgetSwarmWith(t, ctx, cfg, nil)
}

// startBudgetSwarmWith is startBudgetSwarm with remote (when set) giving
// the repository an origin before the start: it returns the daemon's extra
// environment, and the swarm starts in the configuration's git mode
// (without --local).
func startBudgetSwarmWith(t *testing.T, ctx context.Context, cfg string, remote func(b *budgetRun) []string) *budgetRun {
	return startBudgetSwarmSetup(t, ctx, cfg, budgetSetup{remote: remote})
}

// budgetAnswer is the fake provider's answer to every call: a million
// input tokens.
func budgetAnswer(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"type":"message","content":[],"usage":{"input_tokens":1000000,"output_tokens":0}}`)
}

// startBudgetSwarmServing is startBudgetSwarmWith with the fake
// provider's budgetAnswer wrapped by wrap (to encode it, say).
func startBudgetSwarmServing(t *testing.T, ctx context.Context, cfg string, remote func(b *budgetRun) []string, wrap func(http.Handler) http.Handler) *budgetRun {
	return startBudgetSwarmSetup(t, ctx, cfg, budgetSetup{remote: remote, wrap: wrap})
}

// budgetSetup is what a budget test adds to startBudgetSwarm's swarm.
type budgetSetup struct {
	// remote, when set, gives the repository an origin (see
	// startBudgetSwarmWith).
	remote func(b *budgetRun) []string
	// settings are the daemon's extra environment.
	settings []string
	// files are committed into the repository beside the agent (name ->
	// content, executable).
	files map[string][]byte
	// wrap, when set, wraps the fake provider's budgetAnswer.
	wrap func(http.Handler) http.Handler
}

// startBudgetSwarmSetup is startBudgetSwarm with set's additions.
func startBudgetSwarmSetup(t *testing.T, ctx context.Context, cfg string, set budgetSetup) *budgetRun {
	remote, wrap := set.remote, set.wrap
	if wrap == nil {
		wrap = func(h http.Handler) http.Handler { return h }
	}
	image := sandboxImage(t)
	b := &budgetRun{calls: &atomic.Int32{}}
	answer := wrap(http.HandlerFunc(budgetAnswer))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		answer.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	b.repo = shortDir(t)
	gitOut(t, b.repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(b.repo, ".aimi", "tasks"), 0o755)
	b.name = "budget-" + fmt.Sprintf("%x", sha256.Sum256([]byte(b.repo)))[:6]
	b.branch = "feat/" + b.name
	if err := os.WriteFile(filepath.Join(b.repo, ".aimi", "tasks", b.name+"-tasks.json"), taskFileJSON(b.branch, 2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.repo, "budget-agent.sh"), []byte(budgetAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range set.files {
		if err := os.WriteFile(filepath.Join(b.repo, name), content, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, b.repo, "add", "-A")
	gitOut(t, b.repo, "commit", "-q", "-m", "task file and agent")
	removeProjectContainersAtEnd(t, b.repo)
	var extra []string
	start := []string{"swarm", "start", "--all", "--local", "--repo", b.repo, "--socket"}
	if remote != nil {
		extra = remote(b)
		start = []string{"swarm", "start", "--all", "--repo", b.repo, "--socket"}
	}
	dir := shortDir(t)
	b.sock, b.dataDir = filepath.Join(dir, "aimid.sock"), filepath.Join(dir, "data")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIMI_") {
			env = append(env, kv)
		}
	}
	settings := append([]string{"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m",
		"AIMI_SANDBOX_CPUS=1", "AIMI_SANDBOX_PIDS=256", "AIMI_SWARM_STOP_GRACE=2s",
		"AIMI_MODELS_ANTHROPIC_URL=" + up.URL}, append(extra, set.settings...)...)
	b.p = launchAimidWrapped(t, nil, testInstance(b.sock), b.sock, b.dataDir, cfg, "debug", env, settings...)
	if code, out, errOut := aimi(ctx, append(start, b.sock)...); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	return b
}

// stopsAfterTheFirstStory waits for the container to exit and checks that
// it stopped with US-001 done, US-002 not begun, and an error that starts
// with want(calls to the provider so far). It returns its journal.
func (b *budgetRun) stopsAfterTheFirstStory(t *testing.T, want func(calls int32) string) string {
	v := waitFor(t, b.sock, b.repo, 4*time.Minute, "the container exited", allExited)
	// The daemon answers from memory; its save of the exit to the state
	// file may come a moment after (a loaded machine showed it).
	var sw *state.Swarm
	var c *state.Container
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sw = validState(t, b.repo)
		c = sw.ContainerForTask(taskPath(b.name))
		if c != nil && c.Status == state.StatusStopped || time.Now().After(deadline) {
			break
		}
	}
	if c == nil || c.Status != state.StatusStopped || c.StoryProgress.Completed != 1 {
		t.Fatalf("container %+v, want stopped with 1 story completed (provider calls: %d)", c, b.calls.Load())
	}
	// git's ls-remote makes one or two calls (smart, then dumb HTTP).
	if w := want(b.calls.Load()); b.calls.Load() == 0 || !viewHasError(v, c.ContainerName, w) {
		t.Fatalf("want %q in the errors of %s: %+v", w, c.ContainerName, v.Containers)
	}
	journal := filepath.Join(b.repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson")
	if began := storiesBegun(t, journal); strings.Join(began, ",") != "US-001" {
		t.Fatalf("stories begun before the stop: %v, want US-001 only", began)
	}
	return journal
}

// resumeCompletes resumes the swarm and checks that the rerun begins only
// US-002 and that the published branch holds both stories' commits.
func (b *budgetRun) resumeCompletes(t *testing.T, ctx context.Context, journal string) {
	if code, out, errOut := aimi(ctx, "swarm", "resume", "--repo", b.repo, "--socket", b.sock); code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, b.sock, b.repo, 4*time.Minute, "the resumed container completed", func(v api.SwarmView) bool {
		return allExited(v) && len(v.State.Containers) == 1 && v.State.Containers[0].Status == state.StatusCompleted
	})
	if began := storiesBegun(t, journal); strings.Join(began, ",") != "US-002" {
		t.Fatalf("stories begun after resume: %v, want US-002 only", began)
	}
	waitBranch(t, b.repo, b.branch, 2*time.Minute) // published into the checkout
	subjects := gitOut(t, b.repo, "log", "--reverse", "--format=%s", "main.."+b.branch)
	if !strings.Contains(subjects, "US-001: Story 1 (completed)") || !strings.Contains(subjects, "US-002: Story 2 (completed)") || strings.Count(subjects, "US-001") != 1 {
		t.Fatalf("branch %s: %s", b.branch, subjects)
	}
}

// TestSwarmBudgetStopsAtTheStoryBoundaryAndResumeGoesOn: the real daemon
// and engine, the real runner and an agent whose calls through the model
// gateway a fake provider answers with usage. The swarm's budget is
// reached by the first story: it completes, the container begins no
// second one and stops with BUDGET_EXCEEDED and the figures. With the
// budget raised in the config file, `aimi swarm resume` runs the rest on
// top of the first story's commit.
func TestSwarmBudgetStopsAtTheStoryBoundaryAndResumeGoesOn(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := startBudgetSwarm(t, ctx, budgetConfig("2", "0"))
	defer b.p.stop(t)
	journal := b.stopsAfterTheFirstStory(t, func(calls int32) string {
		return fmt.Sprintf("BUDGET_EXCEEDED: the swarm spent %.4f of its budget 2.0000 (swarm.budget", 3*float64(calls))
	})
	// Raised in the config file: resume goes on from where it stopped.
	if err := os.WriteFile(filepath.Join(b.dataDir, "cfg", "config.yaml"), []byte(budgetConfig("100", "0")), 0o644); err != nil {
		t.Fatal(err)
	}
	b.resumeCompletes(t, ctx, journal)
}

// TestStoryBudgetStopsAfterTheStoryThatReachedIt: a story over
// agent.story_budget finishes (committed), its container begins no further
// story and names the story and its figures; resume goes on (the budget
// holds for each story anew).
func TestStoryBudgetStopsAfterTheStoryThatReachedIt(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := startBudgetSwarm(t, ctx, budgetConfig("0", "2.5"))
	defer b.p.stop(t)
	journal := b.stopsAfterTheFirstStory(t, func(calls int32) string {
		return fmt.Sprintf("BUDGET_EXCEEDED: US-001 spent %.4f of its budget 2.5000 (agent.story_budget", 3*float64(calls))
	})
	b.resumeCompletes(t, ctx, journal)
}

// viewHasError reports whether container name shows an error starting with prefix.
func viewHasError(v api.SwarmView, name, prefix string) bool {
	for _, d := range v.Containers {
		if d.Name != name {
			continue
		}
		for _, e := range d.Errors {
			if strings.HasPrefix(e.Message, prefix) {
				return true
			}
		}
	}
	return false
}

// storiesBegun lists the stories a journal shows begun (in_progress).
func storiesBegun(t *testing.T, path string) []string {
	t.Helper()
	recs, err := state.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		m := string(r.Message)
		if r.Type == "progress-update" && strings.Contains(m, `"status":"in_progress"`) {
			i := strings.Index(m, `"storyId":"`)
			out = append(out, m[i+11:i+17])
		}
	}
	return out
}

// A budget that is not an amount stops the daemon at start, naming the key.
func TestBadBudgetStopsTheDaemonNamingTheKey(t *testing.T) {
	parallel(t)
	for _, tc := range []struct{ env, key string }{
		{"AIMI_SWARM_BUDGET=-1", "swarm.budget"},
		{"AIMI_AGENT_STORY_BUDGET=lots", "agent.story_budget"},
	} {
		dir := shortDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, aimidBinary(t), "--socket", filepath.Join(dir, "aimid.sock"), "--data-dir", filepath.Join(dir, "data"), "--config", "-")
		cmd.Env = append(os.Environ(), tc.env, "XDG_CONFIG_HOME="+dir)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.key+":") {
			t.Errorf("%s: aimid %v, want it to stop naming %s:\n%s", tc.env, err, tc.key, out)
		}
	}
}
