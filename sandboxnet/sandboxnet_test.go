package sandboxnet

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/internal/syncbuf"
)

// The hosts the user named, the daemon's egress.allow and a remote-mode
// origin, may be on a private network; their rules say so.
func TestTheUsersHostsMayBePrivate(t *testing.T) {
	t.Parallel()
	rules, err := egress.ParseRules([]string{"mirror.corp.test", "10.0.0.7:8080"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configs.Config{}
	cfg.Egress.Allow = rules
	var buf syncbuf.Buffer
	for _, r := range defaultEgress(cfg, slog.New(slog.NewTextHandler(&buf, nil))) {
		if !r.Private {
			t.Errorf("egress.allow entry %s may not reach a private address", r)
		}
	}
	for _, u := range []string{"https://git.corp.test/org/repo.git", "http://10.1.2.3:8080/r.git", "https://[fd00::7]/r.git"} {
		r, ok := originRule(u)
		if !ok || !r.Private {
			t.Errorf("origin %s: rule %s (%v) may not reach a private address", u, r, ok)
		}
	}
}

// A Swarm mode cluster's sandboxes are sealed behind the door on
// git.address: without one they keep their network (New says so and
// returns nil), and an address that is not an IP is refused.
func TestTheClustersSandboxesNeedTheDoorsAddress(t *testing.T) {
	t.Parallel()
	cfg := &configs.Config{}
	cfg.Engine.Backend = configs.BackendSwarm
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	n, err := New(Options{Config: cfg, DataDir: t.TempDir(), Log: log})
	if err != nil || n != nil {
		t.Fatalf("without git.address: %v, %v; want no network and no error", n, err)
	}
	if !strings.Contains(buf.String(), "git.address is empty") {
		t.Errorf("no warning about the empty git.address:\n%s", buf.String())
	}
	cfg.Git.Address = "git.example.test"
	if n, err := New(Options{Config: cfg, DataDir: t.TempDir(), Log: log}); err == nil || !strings.Contains(err.Error(), "not an IP address") {
		t.Errorf("git.address a name: %v, %v; want it refused", n, err)
	}
}
