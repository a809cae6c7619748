package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// landSwarm is a swarm a land test runs: its repository (and the commit
// its branches start from), the daemon, and the test's context.
type landSwarm struct {
	repo, base, sock, data string
	img                    string
	p                      *proc
	ctx                    context.Context
}

// startLandSwarm commits files (task file name -> content) into a new
// repository, starts a local-mode daemon with env on the sandbox image
// and runs the swarm of them (with --follow: to its end), removing it when
// the test ends.
func startLandSwarm(t *testing.T, files map[string][]byte, follow bool, env ...string) *landSwarm {
	t.Helper()
	ls := &landSwarm{img: sandboxImage(t), repo: gitRepo(t, 1)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ls.repo, ".aimi", "tasks", name+"-tasks.json"), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commitAll(t, ls.repo)
	ls.base = gitOut(t, ls.repo, "rev-parse", "HEAD")
	tmp := shortDir(t)
	ls.sock, ls.data = filepath.Join(tmp, "aimid.sock"), filepath.Join(tmp, "data")
	ls.p = ls.launch(t, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	ls.ctx = ctx
	args := []string{"swarm", "start", "--all", "--local", "--max", "8", "--repo", ls.repo, "--socket", ls.sock}
	if follow {
		args = append(args, "--follow")
	}
	if code, out, errOut := aimi(ctx, args...); code != 0 {
		t.Fatalf("%v: %d\n%s\n%s", args, code, out, errOut)
	}
	t.Cleanup(func() {
		aimi(context.Background(), "swarm", "cleanup", "--repo", ls.repo, "--socket", ls.sock, "--force")
	})
	return ls
}

// launch starts the swarm's daemon (again, after a crash) with env.
func (ls *landSwarm) launch(t *testing.T, env ...string) *proc {
	t.Helper()
	return launch(t, daemonOpts{Sock: ls.sock, DataDir: ls.data, Image: ls.img, Local: true, Env: env})
}

// aimi runs an aimi command against the swarm's repository and daemon.
func (ls *landSwarm) aimi(args ...string) (int, string, string) {
	return aimi(ls.ctx, append(args, "--repo", ls.repo, "--socket", ls.sock)...)
}
