package sandboxnet

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/orchestrator"
)

// A repository's .aimi/config.yaml turns egress.ask on for its swarms
// (the daemon's is off); the view names each rule's source and the
// grants, which end with their container.
func TestARepositoryMayAskAndTheViewShowsTheGrants(t *testing.T) {
	rules, err := egress.ParseRules([]string{"proxy.golang.org"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configs.Config{}
	cfg.Egress.Allow, cfg.Egress.AskWait = rules, time.Minute
	var buf syncbuf.Buffer
	n, err := New(Options{Config: cfg, DataDir: shortDir(t), Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.CloseAll)
	asking, quiet := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(asking, ".aimi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(asking, ".aimi", "config.yaml"), []byte("egress:\n  ask: true\n  allow: [files.example.test]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, q := contract.Sandbox{Swarm: "s", Container: "a"}, contract.Sandbox{Swarm: "s2", Container: "q"}
	for sb, repo := range map[contract.Sandbox]string{a: asking, q: quiet} {
		if _, err := n.Open(context.Background(), orchestrator.NetSandbox{SwarmID: sb.Swarm, Container: sb.Container, Repo: repo}); err != nil {
			t.Fatal(err)
		}
	}
	if n.askWait(a) != time.Minute || n.askWait(q) != 0 {
		t.Errorf("ask waits: %v for the asking repository's, %v for the other's; want 1m and 0", n.askWait(a), n.askWait(q))
	}
	n.Grant(context.Background(), egress.Grant{Scope: egress.ScopeContainer, Swarm: "s", Container: "a", Host: "pkg.example.test", Port: 443, By: "person"})
	v := n.EgressRules(a)
	if v == nil || !v.Ask || len(v.Config) != 1 || v.Config[0] != "proxy.golang.org" || len(v.Repository) != 1 || v.Repository[0] != "files.example.test" ||
		len(v.Granted) != 1 || v.Granted[0].Rule != "pkg.example.test:443" || v.Granted[0].Scope != "container" {
		t.Errorf("view of a: %+v", v)
	}
	if _, ok := egress.Match(n.rulesOf(a), egress.Request{Method: "CONNECT", Host: "pkg.example.test", Port: 443}); !ok {
		t.Error("the grant is not among a's rules")
	}
	n.Close(a)
	if n.EgressRules(a) != nil || len(n.grants.Of(a)) != 0 {
		t.Error("a's grant outlived it")
	}
}
