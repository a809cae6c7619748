package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/notify"
	"github.com/aimi-tools/swarm/state"
)

// TestLimitWithoutResetIsDecidedOnce: the real daemon, engine and runner,
// a provider that answers the first call 429 without any reset header
// (the gateway draws a jittered backoff), and a webhook. The reset the
// gateway holds the provider's calls to (its file of resets), the one
// journaled with the limited call and the one the limit notice tells are
// one and the same time: the limit is decided once.
func TestLimitWithoutResetIsDecidedOnce(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs a real container")
	}
	prov := &limitingProvider{limited: 1, arrived: make(chan struct{})}
	up := httptest.NewServer(prov)
	t.Cleanup(up.Close)
	name := "limonce-" + fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name())))[:6]
	repo := limitRepo(t, name)
	hook := newHookReceiver(t)
	image := sandboxImage(t)
	dir := shortDir(t)
	sock, dataDir := filepath.Join(dir, "aimid.sock"), filepath.Join(dir, "data")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIMI_") {
			env = append(env, kv)
		}
	}
	cfg := "agent:\n  kind: acp\n  command: ./modelagent\n  limit_retries: 3\n  env:\n    ANTHROPIC_API_KEY: sk-ant-limit-test\ngit:\n  mode: local\nnotify:\n  webhooks: [" + hook.url + "/hooks/T0/B0/HOOKTOKEN]\n"
	p := launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Config: cfg, LogLevel: "debug", Base: env, Env: []string{
		"AIMI_MODELS_ANTHROPIC_URL=" + up.URL, "AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m", "AIMI_SANDBOX_SWAP=256m",
		"AIMI_SANDBOX_CPUS=0.5", "AIMI_SANDBOX_PIDS=128", "AIMI_SWARM_STOP_GRACE=2s"}})
	runLimitSwarm(t, sock, repo)
	notices := decodeNotices(t, hook.wait(t, []string{notify.KindLimitWait}))
	p.stop(t)
	sw := validState(t, repo)
	c := containerOf(t, sw, name)

	var told []time.Time
	for _, no := range notices {
		if no.Kind == notify.KindLimitWait {
			told = append(told, no.Until)
		}
	}
	journaled := journaledResets(t, repo, contract.Sandbox{Swarm: sw.SwarmID, Container: c.ContainerName})
	held := heldResets(t, filepath.Join(dataDir, "gateway", "limits.json"))
	if len(told) != 1 || len(journaled) != 1 || len(held) != 1 || !told[0].Equal(journaled[0]) || !held[0].Equal(journaled[0]) {
		t.Fatalf("one limited answer without a reset header: the gateway holds its calls until %v, the journal says %v, the notice %v; want one and the same time",
			held, journaled, told)
	}
}

// journaledResets are the resets of the limited calls in sb's journal.
func journaledResets(t *testing.T, repo string, sb contract.Sandbox) []time.Time {
	t.Helper()
	recs, err := state.ReadJournal(state.Open(repo).JournalPath(sb))
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, r := range recs {
		if r.Usage != nil && r.Usage.LimitedUntil != nil {
			out = append(out, *r.Usage.LimitedUntil)
		}
	}
	return out
}

// heldResets reads the gateway's file of the resets it holds calls to
// (kept across restarts).
func heldResets(t *testing.T, path string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Limits []struct {
			Provider string    `json:"provider"`
			Until    time.Time `json:"until"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	var out []time.Time
	for _, l := range st.Limits {
		if strings.EqualFold(l.Provider, "anthropic") {
			out = append(out, l.Until)
		}
	}
	return out
}
