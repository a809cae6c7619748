package gitserve

import (
	"archive/tar"
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// getWorkspace asks for g's ready-made workspace as a runner on branch.
func getWorkspace(t *testing.T, g Grant, branch string) (status int, exists string, body []byte) {
	t.Helper()
	u, err := url.Parse(g.RepoURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = contract.WorkspacePath
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u.String(), nil)
	req.Header.Set("Authorization", "Bearer "+g.Token)
	req.Header.Set(contract.WorkspaceBranchHeader, branch)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(t, g.CAFile)}}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get(contract.WorkspaceExistsHeader), body
}

// TestWorkspaceIsMadeOnceForAFanOut: eight containers starting new
// branches from the same default branch, all asking at once, get the same
// workspace, made once; it names no path of the daemon's and its origin is
// the placeholder the runner replaces.
func TestWorkspaceIsMadeOnceForAFanOut(t *testing.T) {
	repo := newRepo(t)
	commitFile(t, repo, "a.txt", "a\n")
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctxT(t), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	const n = 8
	grants := make([]Grant, n)
	for i := range grants {
		g, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-c" + itoa(i), Branch: "feat/c" + itoa(i)}, "")
		if err != nil {
			t.Fatal(err)
		}
		grants[i] = g
	}
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i, g := range grants {
		wg.Go(func() {
			status, exists, body := getWorkspace(t, g, "feat/c"+itoa(i))
			if status != http.StatusOK || exists != "false" {
				t.Errorf("container %d: HTTP %d, exists %q: %s", i, status, exists, body)
			}
			bodies[i] = body
		})
	}
	wg.Wait()
	for i := range bodies {
		if !bytes.Equal(bodies[i], bodies[0]) {
			t.Errorf("container %d got another workspace than container 0", i)
		}
	}
	if got := s.workspaces.built.Load(); got != 1 {
		t.Errorf("%d workspaces made for one tip, want 1", got)
	}
	tr := tar.NewReader(bytes.NewReader(bodies[0]))
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = string(data)
		if strings.Contains(string(data), s.dir) {
			t.Errorf("%s names the daemon's data directory", h.Name)
		}
	}
	if files["a.txt"] != "a\n" || !strings.Contains(files[".git/config"], contract.WorkspaceOrigin) || files[".git/shallow"] == "" {
		t.Errorf("the workspace lacks the file, the placeholder origin or the shallow list: %v", files[".git/config"])
	}
}

// TestWorkspaceOnlyOfTheTokensBranch: a token gets its own branch's
// workspace only, and a wrong token nothing.
func TestWorkspaceOnlyOfTheTokensBranch(t *testing.T) {
	repo := newRepo(t)
	commitFile(t, repo, "a.txt", "a\n")
	mustGit(t, repo, "branch", "feat/b")
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctxT(t), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-a", Branch: "feat/a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := getWorkspace(t, g, "feat/b"); status != http.StatusConflict {
		t.Errorf("another branch's workspace: HTTP %d, want 409", status)
	}
	bad := g
	bad.Token = "not-the-token"
	if status, _, _ := getWorkspace(t, bad, "feat/a"); status != http.StatusUnauthorized {
		t.Errorf("a wrong token: HTTP %d, want 401", status)
	}
	gb, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-b", Branch: "feat/b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if status, exists, _ := getWorkspace(t, gb, "feat/b"); status != http.StatusOK || exists != "true" {
		t.Errorf("an existing branch's workspace: HTTP %d, exists %q", status, exists)
	}
}

// TestRefTipReadsWhatGitReads: loose, packed, HEAD and missing refs read
// from the files as git reads them.
func TestRefTipReadsWhatGitReads(t *testing.T) {
	repo := newRepo(t)
	commitFile(t, repo, "a.txt", "a\n")
	mustGit(t, repo, "branch", "packed")
	mustGit(t, repo, "pack-refs", "--all")
	commitFile(t, repo, "b.txt", "b\n")
	mustGit(t, repo, "branch", "loose")
	for _, ref := range []string{"HEAD", "refs/heads/packed", "refs/heads/loose", "refs/heads/none"} {
		want, _ := gitOut(repo, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
		got, err := refTip(ctxT(t), filepath.Join(repo, ".git"), ref)
		if err != nil || got != strings.TrimSpace(want) {
			t.Errorf("%s: %q %v, git says %q", ref, got, err, want)
		}
	}
}

// TestWorkspaceLeavesOutWhatNoRunnerNeeds: every entry of the tar is a
// file each sandbox creates, so the clone's empty directories and origin's
// HEAD (packed-refs names origin's branch) are left out; git still finds
// the unpacked workspace whole and clean, commits and fetches in it.
func TestWorkspaceLeavesOutWhatNoRunnerNeeds(t *testing.T) {
	repo := newRepo(t)
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctxT(t), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-a", Branch: "feat/a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := getWorkspace(t, g, "feat/a")
	if status != http.StatusOK {
		t.Fatalf("HTTP %d: %s", status, body)
	}
	ws := filepath.Join(t.TempDir(), "ws")
	names := unpackTar(t, body, ws)
	for _, never := range []string{".git/objects/info", ".git/refs/tags", ".git/refs/remotes", ".git/refs/remotes/origin", ".git/refs/remotes/origin/HEAD", ".git/logs"} {
		if names[never] {
			t.Errorf("the workspace holds %s", never)
		}
	}
	if out := mustGit(t, ws, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Errorf("git status in the unpacked workspace: %s", out)
	}
	mustGit(t, ws, "fsck", "--strict")
	commitFile(t, ws, "story.txt", "done\n")
	main := mustGit(t, repo, "rev-parse", "main")
	mustGit(t, ws, "-c", "url.file://"+s.mirrorPath("sw1")+".insteadOf="+contract.WorkspaceOrigin, "fetch", "--quiet", "origin")
	if got := mustGit(t, ws, "rev-parse", "origin/main"); got != main {
		t.Errorf("after a fetch origin/main is %s, want %s", got, main)
	}
	mustGit(t, ws, "fsck", "--strict")
}

// unpackTar writes the directories and regular files of a tar under dir
// and returns every entry's name.
func unpackTar(t *testing.T, data []byte, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names[strings.TrimSuffix(h.Name, "/")] = true
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				b, _ := io.ReadAll(tr)
				err = os.WriteFile(p, b, os.FileMode(h.Mode)&0o777)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorkspaceWhenTheDataDirHoldsAnEquals: a data directory whose path
// holds "=" still gets ready-made workspaces (git reads a -c setting's key
// up to its first "=", so the mirror's path cannot be in one).
func TestWorkspaceWhenTheDataDirHoldsAnEquals(t *testing.T) {
	repo := newRepo(t)
	s, _ := newService(t, Options{DataDir: filepath.Join(t.TempDir(), "a=b", "data")})
	if err := s.ListenOn(ctxT(t), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-c", Branch: "feat/c"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := getWorkspace(t, g, "feat/c"); status != http.StatusOK {
		t.Fatalf("HTTP %d: %s", status, body)
	}
}
