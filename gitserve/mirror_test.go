package gitserve

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// TestFanOutGrantsShareTheRefListing: grants of one checkout at once list
// its refs fewer times than there are grants, and each still sees a
// commit made before it asked.
func TestFanOutGrantsShareTheRefListing(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	script := "#!/bin/sh\ncase \"$*\" in *for-each-ref*refs/heads*) echo x >> " + calls + ";; esac\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	repo := newRepo(t)
	commitFile(t, repo, "a.txt", "a\n")
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctxT(t), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-first", Branch: "feat/first"}, ""); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(calls)
	tip := commitFile(t, repo, "b.txt", "b\n")
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-c" + itoa(i), Branch: "feat/c" + itoa(i)}, ""); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	data, _ := os.ReadFile(calls)
	if listed := strings.Count(string(data), "x"); listed < 1 || listed >= n {
		t.Errorf("%d grants at once listed the refs %d times, want 1 to %d", n, listed, n-1)
	}
	if got := mustGit(t, s.mirrorPath("sw1"), "rev-parse", "refs/heads/main"); got != tip {
		t.Errorf("the mirror's main is %s, want the commit made before the grants, %s", got, tip)
	}
}

// TestPrepareMakesTheMirrorAGrantThenUses: a swarm's repository is made
// before its first grant when asked, the grant uses it as it is, and what
// Prepare cannot use is refused without a copy.
func TestPrepareMakesTheMirrorAGrantThenUses(t *testing.T) {
	repo := newRepo(t)
	commitFile(t, repo, "a.txt", "a\n")
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctxT(t), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctxT(t), repo, "sw1"); err != nil {
		t.Fatal(err)
	}
	mirror := s.mirrorPath("sw1")
	before, err := os.Stat(filepath.Join(mirror, "HEAD"))
	if err != nil {
		t.Fatalf("no mirror after Prepare: %v", err)
	}
	if _, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-a", Branch: "feat/a"}, ""); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(filepath.Join(mirror, "HEAD"))
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("the grant made the mirror again (%v)", err)
	}
	for _, bad := range []struct{ repo, swarm string }{{"relative/path", "sw2"}, {repo, "../sw3"}, {t.TempDir(), "sw4"}} {
		if err := s.Prepare(ctxT(t), bad.repo, bad.swarm); err == nil {
			t.Errorf("Prepare(%q, %q) made a copy", bad.repo, bad.swarm)
		}
	}
	for _, key := range []string{"sw2", "sw4"} {
		if _, err := os.Stat(s.mirrorPath(key)); err == nil {
			t.Errorf("a refused Prepare left %s", s.mirrorPath(key))
		}
	}
}
