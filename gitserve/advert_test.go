package gitserve

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// TestCapabilityListIsKept: a protocol v2 info/refs of upload-pack is
// answered by git once and then from what it said, byte for byte, while
// the mirror's config is unchanged; a config change is answered by git
// again; a protocol v0 info/refs (the refs themselves) is always git's;
// clones over v2 work with the kept answer.
func TestCapabilityListIsKept(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	s, logs := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-adv", Container: "aimi-adv", Branch: "feat-adv"}, "")
	if err != nil {
		t.Fatal(err)
	}
	pool := caPool(t, g.CAFile)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(protocol string) string {
		t.Helper()
		return infoRefs(t, ctx, client, g, protocol)
	}
	const keptLine = "answered from the kept capability list"
	kept := func() int { return strings.Count(logs.String(), keptLine) }

	first := get("version=2")
	if !strings.Contains(first, "version 2\n") || !strings.Contains(first, "application/x-git-upload-pack-advertisement") || kept() != 0 {
		t.Fatalf("first v2 answer (kept %d):\n%s", kept(), first)
	}
	if again := get("version=2"); again != first || kept() != 1 {
		t.Fatalf("second v2 answer (kept %d):\n%s\nwant git's:\n%s", kept(), again, first)
	}

	// The mirror's config decides the list: changed, git answers again.
	mirror := s.mirrorPath("swarm-adv")
	if !strings.Contains(first, "filter") {
		t.Fatalf("the mirror allows filters, but git's list does not say so:\n%s", first)
	}
	mustGit(t, mirror, "config", "uploadpack.allowFilter", "false")
	changed := get("version=2")
	if strings.Contains(changed, "filter") || kept() != 1 {
		t.Fatalf("answer after the config change (kept %d):\n%s", kept(), changed)
	}
	mustGit(t, mirror, "config", "uploadpack.allowFilter", "true")

	// Any other Git-Protocol value (the sandbox sends what it likes) goes
	// to git: a key per made-up value would grow the cache without end.
	for i := range 3 {
		get(fmt.Sprintf("version=2:x-%d", i))
	}
	if kept() != 1 {
		t.Fatalf("a made-up Git-Protocol value was served from the kept list (%d)", kept())
	}
	s.adverts.mu.Lock()
	n := len(s.adverts.entries)
	s.adverts.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d capability lists kept, want the one for %q", n, gitV2)
	}

	// Protocol v0's answer lists the refs: never kept.
	v0 := get("")
	if !strings.Contains(v0, "refs/heads/main") {
		t.Fatalf("v0 answer without the refs:\n%s", v0)
	}
	get("")
	if kept() != 1 {
		t.Fatalf("a v0 answer was served from the kept list (%d)", kept())
	}

	// Clones over v2, the later ones with the kept list.
	for i := range 3 {
		dir := filepath.Join(t.TempDir(), "w")
		if out, err := gitOut("", clientEnv(g.CAFile, bearer(g.Token)), "-c", "protocol.version=2", "clone", "-q", "--depth", "1", g.RepoURL, dir); err != nil {
			t.Fatalf("clone %d: %v\n%s", i, err, out)
		}
		if got, want := mustGit(t, dir, "rev-parse", "HEAD"), mustGit(t, repo, "rev-parse", "HEAD"); got != want {
			t.Fatalf("clone %d at %s, want %s", i, got, want)
		}
	}
	if kept() < 3 {
		t.Errorf("clones used the kept list %d times, want at least 3 of 4 answers", kept())
	}
}

// infoRefs asks the service for g's upload-pack advertisement with the
// Git-Protocol header protocol (none when empty); it returns the answer's
// caching headers and body.
func infoRefs(t *testing.T, ctx context.Context, client *http.Client, g Grant, protocol string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.RepoURL+"/info/refs?service=git-upload-pack", nil)
	req.Header.Set("Authorization", "Bearer "+g.Token)
	if protocol != "" {
		req.Header.Set("Git-Protocol", protocol)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("info/refs: %d %v %q", resp.StatusCode, err, body)
	}
	return strings.Join([]string{resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"),
		resp.Header.Get("Expires"), resp.Header.Get("Pragma"), string(body)}, "\n")
}
