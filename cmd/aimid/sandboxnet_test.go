package main

import (
	"log/slog"
	"testing"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/internal/syncbuf"
)

// The hosts the user named, the daemon's egress.allow and a remote-mode
// origin, may be on a private network; their rules say so.
func TestTheUsersHostsMayBePrivate(t *testing.T) {
	parallel(t)
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
