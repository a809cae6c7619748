package gitserve

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// zerosUnderNames commits one blob of size zero bytes under n names on
// branch of repo: a push of a few KiB whose checkout is n*size.
func zerosUnderNames(t *testing.T, repo, branch string, size, n int) {
	t.Helper()
	mustGit(t, repo, "checkout", "-q", "-b", branch)
	zeros := make([]byte, size)
	for i := range n {
		if err := os.WriteFile(filepath.Join(repo, "z"+itoa(i)), zeros, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustGit(t, repo, "add", "-A")
	mustGit(t, repo, "commit", "-q", "-m", "zeros")
	mustGit(t, repo, "checkout", "-q", "main")
}

// TestWorkspacePastItsBoundIsNotWritten: a branch whose checkout (one MiB
// of zeros under 16 names) is past Limits.MaxWorkspace gets no ready-made
// workspace (the runner clones) and nothing of it reaches the service's
// disk; one within the bound is made as before; a tree whose
// .gitattributes may make the checkout far larger than its blobs (ident)
// gets none either.
func TestWorkspacePastItsBoundIsNotWritten(t *testing.T) {
	repo := newRepo(t)
	commitFile(t, repo, "a.txt", "a\n")
	zerosUnderNames(t, repo, "feat/big", 1<<20, 16)
	mustGit(t, repo, "checkout", "-q", "-b", "feat/ident")
	commitFile(t, repo, ".gitattributes", "*.txt ident\n")
	mustGit(t, repo, "checkout", "-q", "main")
	const limit = 4 << 20
	s, logs := newService(t, Options{Limits: Limits{MaxWorkspace: limit}})
	if err := s.ListenOn(ctxT(t), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for _, branch := range []string{"feat/big", "feat/ident"} {
		g, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-" + strings.TrimPrefix(branch, "feat/"), Branch: branch}, "")
		if err != nil {
			t.Fatal(err)
		}
		before, err := diskUsage(s.dir)
		if err != nil {
			t.Fatal(err)
		}
		if status, _, body := getWorkspace(t, g, branch); status != http.StatusNotFound {
			t.Errorf("%s: HTTP %d (%d bytes), want 404: the runner clones", branch, status, len(body))
		}
		after, err := diskUsage(s.dir)
		if err != nil {
			t.Fatal(err)
		}
		if after-before > limit/4 {
			t.Errorf("%s: the service's directory grew by %d bytes", branch, after-before)
		}
	}
	if n := s.workspaces.built.Load(); n != 0 {
		t.Errorf("%d workspaces made, want none", n)
	}
	if l := logs.String(); !strings.Contains(l, KeyMaxWorkspace) || !strings.Contains(l, "ident") {
		t.Errorf("the log does not say why there was no workspace:\n%s", l)
	}
	g, err := s.Grant(ctxT(t), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-small", Branch: "feat/small"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := getWorkspace(t, g, "feat/small"); status != http.StatusOK {
		t.Errorf("a small workspace: HTTP %d: %s", status, body)
	}
}

// The cost counts blocks: a tree of many tiny files costs a block each.
func TestWorkspaceCostCountsBlocks(t *testing.T) {
	repo := newRepo(t)
	for i := range 40 {
		if err := os.WriteFile(filepath.Join(repo, "f"+itoa(i)), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustGit(t, repo, "add", "-A")
	commitFile(t, repo, "last", "x")
	n := int64(len(strings.Split(mustGit(t, repo, "ls-tree", "-r", "-t", "HEAD"), "\n"))) // every file is one block
	cost, err := workspaceCost(ctxT(t), repo, "HEAD", 1<<30)
	if err != nil || cost != n*diskBlock {
		t.Errorf("cost %d %v, want %d", cost, err, n*diskBlock)
	}
	if _, err := workspaceCost(ctxT(t), repo, "HEAD", (n-1)*diskBlock); err == nil {
		t.Errorf("%d files within %d blocks", n, n-1)
	}
	commitFile(t, repo, ".gitattributes", "* text eol=crlf\n")
	if cost, err := workspaceCost(ctxT(t), repo, "HEAD", 1<<30); err != nil || cost != (n+1)*diskBlock {
		t.Errorf("with line endings converted: %d %v", cost, err)
	}
}

func FuzzParseTreeEntry(f *testing.F) {
	f.Add([]byte("100644 blob 8baef1b4abc478178b004d62031cf7fe6db6f903      12\ta b/c"))
	f.Add([]byte("040000 tree 8baef1b4abc478178b004d62031cf7fe6db6f903       -\td"))
	f.Add([]byte("160000 commit 8baef1b4abc478178b004d62031cf7fe6db6f903       -\tsub\x00next"))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, ok := parseTreeEntry(line)
		if ok && (e.path == "" || e.size < -1 || (e.size == -1) != strings.HasSuffix(strings.Fields(strings.SplitN(string(line), "\t", 2)[0])[3], "-")) {
			t.Fatalf("%q parsed to %+v", line, e)
		}
		var c treeCount
		if ok && c.add(e) == nil && c.plain < diskBlock {
			t.Fatalf("%+v costs %d, less than a block", e, c.plain)
		}
		if c, err := countTree(bufio.NewReaderSize(strings.NewReader(string(line)), 64), 1<<20); err == nil && c.plain > 1<<20 {
			t.Fatalf("countTree passed its bound: %d", c.plain)
		}
	})
}
