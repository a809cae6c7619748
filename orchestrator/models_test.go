package orchestrator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// fakeModels is a hand-written ModelAccess.
type fakeModels struct {
	mu        sync.Mutex
	listening []string
	granted   map[string]string // container -> gateway
	revoked   []string
}

func (f *fakeModels) ListenOn(ctx context.Context, ip string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listening = append(f.listening, ip)
	return nil
}

func (f *fakeModels) Grant(sb contract.Sandbox, gateway string) (ModelGrant, error) {
	name := sb.Container
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.granted == nil {
		f.granted = map[string]string{}
	}
	f.granted[name] = gateway
	return ModelGrant{
		Env:    map[string]string{"ANTHROPIC_API_KEY": "placeholder-" + name, "ANTHROPIC_BASE_URL": "https://" + gateway + ":9/anthropic"},
		CAFile: "/data/git/ca.pem", BundleFile: "/data/gateway/ca-bundle.pem",
	}, nil
}

func (f *fakeModels) Revoke(sb contract.Sandbox) {
	name := sb.Container
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, name)
}

// TestModelGrantReplacesTheKeyInBothGitModes: the container's environment
// holds its placeholder and the gateway's base URL, never the key, with
// the CA variables and one CA mount beside the git service's; its model
// access is revoked when it finishes.
func TestModelGrantReplacesTheKeyInBothGitModes(t *testing.T) {
	for _, local := range []bool{true, false} {
		repo, files := testRepo(t, []string{"mg1"}, 1)
		var mu sync.Mutex
		specs := map[string]engine.Spec{}
		eng := newFakeEngine(nil)
		eng.programs = func(s engine.Spec) program {
			mu.Lock()
			specs[s.Name] = s
			mu.Unlock()
			return scripted(0, storiesDone(1)...)
		}
		git, models := &fakeGit{}, &fakeModels{}
		// The key would never be in RunnerEnv (aimid keeps it out); if it
		// were, the grant still wins.
		m := newTestManager(t, eng, Config{Git: git, Publisher: git, Models: models, RunnerEnv: map[string]string{"ANTHROPIC_API_KEY": "sk-VERY-SECRET", "OTHER": "x"}})
		if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Local: local}); err != nil {
			t.Fatal(err)
		}
		v := waitTerminal(t, m, repo, 10*time.Second)
		models.mu.Lock()
		if !slices.Contains(models.listening, "172.30.0.1") {
			t.Errorf("local=%t: gateway listening on %v, want the network gateway", local, models.listening)
		}
		for _, d := range v.Containers {
			if models.granted[d.Name] != "172.30.0.1" || !slices.Contains(models.revoked, d.Name) {
				t.Errorf("local=%t %s: granted through %q, revoked %v", local, d.Name, models.granted[d.Name], models.revoked)
			}
			mu.Lock()
			s := specs[d.Name]
			mu.Unlock()
			env := strings.Join(s.Env, "\n")
			for _, want := range []string{"ANTHROPIC_API_KEY=placeholder-" + d.Name, "ANTHROPIC_BASE_URL=https://172.30.0.1:9/anthropic", "OTHER=x",
				contract.EnvNodeExtraCACerts + "=" + caMountPath, contract.EnvSSLCertFile + "=" + bundleMountPath, contract.EnvRequestsCABundle + "=" + bundleMountPath} {
				if !strings.Contains(env, want) {
					t.Errorf("local=%t %s: env lacks %s", local, d.Name, want)
				}
			}
			if strings.Contains(env, "sk-VERY-SECRET") {
				t.Errorf("local=%t %s: the key reached the container", local, d.Name)
			}
			var targets []string
			for _, mt := range s.Mounts {
				targets = append(targets, mt.Target)
			}
			slices.Sort(targets)
			if !slices.Equal(targets, []string{bundleMountPath, caMountPath}) {
				t.Errorf("local=%t %s: mounts %v, want the CA once and the bundle", local, d.Name, targets)
			}
		}
		models.mu.Unlock()
	}
}
