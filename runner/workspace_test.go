package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/internal/gittest"
)

// serviceRepo is a repository with a file, an executable, a directory and
// a symbolic link on main, served by a real git service on the loopback.
func serviceRepo(t *testing.T) (repo string, s *gitserve.Service) {
	t.Helper()
	repo = filepath.Join(t.TempDir(), "repo")
	gittest.Git(t, "", "init", "-q", "-b", "main", repo)
	must(t, os.MkdirAll(filepath.Join(repo, "src", "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("hello\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, "src", "deep", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(t, os.Symlink("src/deep/run.sh", filepath.Join(repo, "run")))
	gittest.Git(t, repo, "add", "-A")
	gittest.Git(t, repo, "commit", "-q", "-m", "first")
	s, err := gitserve.New(gitserve.Options{DataDir: filepath.Join(t.TempDir(), "data"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	must(t, s.ListenOn(t.Context(), "127.0.0.1"))
	return repo, s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// prepared fills a new workspace for branch as prepare does, from the
// ready-made workspace (daemonGit) or by a clone, and returns it.
func prepared(t *testing.T, g gitserve.Grant, branch string, daemonGit bool) (*run, string) {
	t.Helper()
	cfg := Config{Workspace: filepath.Join(t.TempDir(), "ws"), DaemonGit: daemonGit, GitToken: g.Token,
		GitUsername: DefaultGitUsername, CAFile: g.CAFile, AuthorName: "T", AuthorEmail: "t@example.com",
		PushRetry: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r := &run{cfg: cfg, log: cfg.Logger, git: newGit(&cfg), req: &acpmsg.TaskRequest{RepoURL: g.RepoURL, BranchName: branch}}
	must(t, r.git.connect(&cfg, g.RepoURL))
	t.Cleanup(r.git.close)
	cloned, how, err := r.fillWorkspace(t.Context())
	must(t, err)
	if want := map[bool]string{true: "ready-made", false: "clone"}[daemonGit]; how != want {
		t.Fatalf("the workspace came from %q, want %q", how, want)
	}
	must(t, r.git.checkout(t.Context(), branch, cloned))
	return r, cfg.Workspace
}

// TestReadyMadeWorkspaceIsWhatACloneMakes: the workspace a runner unpacks
// from the daemon's git service is the one its clone would have made (the
// same commit, branch, files with their modes and links, index, origin,
// shallow history; not origin's HEAD, which no runner uses), for a new
// branch and for one the repository holds; a commit made in it is pushed
// as from a clone, and a fetch from origin works in it.
func TestReadyMadeWorkspaceIsWhatACloneMakes(t *testing.T) {
	repo, s := serviceRepo(t)
	for _, tc := range []struct {
		name     string
		existing bool
	}{{"new branch", false}, {"existing branch", true}} {
		t.Run(tc.name, func(t *testing.T) {
			branch := "feat/" + strings.ReplaceAll(tc.name, " ", "-")
			sb := contract.Sandbox{Swarm: "sw1", Container: "aimi-" + strings.ReplaceAll(tc.name, " ", "-")}
			if tc.existing {
				gittest.Git(t, repo, "branch", branch, "main")
			}
			g, err := s.Grant(t.Context(), contract.ContainerBranch{Repo: repo, Swarm: sb.Swarm, Container: sb.Container, Branch: branch}, "")
			must(t, err)
			ready, readyDir := prepared(t, g, branch, true)
			_, cloneDir := prepared(t, g, branch, false)
			for _, args := range [][]string{
				{"rev-parse", "HEAD"}, {"symbolic-ref", "HEAD"}, {"rev-parse", "--is-shallow-repository"},
				{"ls-files", "-s", "--debug"}, {"status", "--porcelain", "--untracked-files=all"},
				{"config", "remote.origin.url"}, {"config", "remote.origin.fetch"},
				{"for-each-ref", "--format=%(refname) %(objectname) %(upstream)"},
			} {
				got, want := gittest.Git(t, readyDir, args...), gittest.Git(t, cloneDir, args...)
				switch args[0] {
				case "ls-files":
					got, want = stagedOnly(got), stagedOnly(want)
				case "for-each-ref":
					want = withoutOriginHead(want)
				}
				if got != want {
					t.Errorf("git %v: ready-made %q, clone %q", args, got, want)
				}
			}
			gittest.Git(t, readyDir, "fsck", "--strict")
			if l, err := os.Readlink(filepath.Join(readyDir, "run")); err != nil || l != "src/deep/run.sh" {
				t.Errorf("the link is %q %v", l, err)
			}
			if fi, err := os.Stat(filepath.Join(readyDir, "src", "deep", "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
				t.Errorf("the executable lost its mode: %v %v", fi.Mode(), err)
			}
			must(t, os.WriteFile(filepath.Join(readyDir, "story.txt"), []byte("done\n"), 0o644))
			if ok, err := ready.git.commitAll(t.Context(), "story"); !ok || err != nil {
				t.Fatalf("commit: %v %v", ok, err)
			}
			must(t, ready.git.push(context.Background(), branch, time.Minute))
			mirror, tip, err := s.Received(sb, branch)
			must(t, err)
			if head := gittest.Git(t, readyDir, "rev-parse", "HEAD"); tip != head {
				t.Errorf("the service received %q, the workspace's HEAD is %q", tip, head)
			}
			// A fetch from origin (through the mirror: the token is the
			// runner's) writes the remote refs the workspace came without.
			gittest.Git(t, readyDir, "-c", "url.file://"+mirror+".insteadOf="+g.RepoURL, "fetch", "--quiet", "origin")
			gittest.Git(t, readyDir, "fsck", "--strict")
			if out := gittest.Git(t, readyDir, "status", "--porcelain", "--untracked-files=all"); out != "" {
				t.Errorf("git status after a fetch: %s", out)
			}
		})
	}
}

// withoutOriginHead drops origin's HEAD from a for-each-ref listing: a
// ready-made workspace leaves it out (packed-refs names origin's branch).
func withoutOriginHead(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "refs/remotes/origin/HEAD ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// stagedOnly keeps the mode, object and path of each `ls-files -s --debug`
// entry: the stat data differ between any two checkouts.
func stagedOnly(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "  ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// tarOf builds a tar of entries: a name, then "dir", "link:<target>" or
// the file's content.
func tarOf(t testing.TB, entries ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e[1]))}
		switch {
		case e[1] == "dir":
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case strings.HasPrefix(e[1], "link:"):
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, strings.TrimPrefix(e[1], "link:")
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(e[1]))
		}
	}
	_ = tw.Close()
	return b.Bytes()
}

// TestUntarWritesNothingOutsideTheWorkspace: names and links that lead
// out of the workspace are refused, and so is content past the bound.
func TestUntarWritesNothingOutsideTheWorkspace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries [][2]string
	}{
		{"dot-dot", [][2]string{{"../out", "x"}}},
		{"absolute", [][2]string{{"/out", "x"}}},
		{"through a link", [][2]string{{"l", "link:../outside"}, {"l/out", "x"}}},
		{"through an absolute link", [][2]string{{"l", "link:OUTSIDE"}, {"l/out", "x"}}},
		{"over a link", [][2]string{{"l", "link:../outside/out"}, {"l", "x"}}},
		{"too big", [][2]string{{"big", strings.Repeat("x", 2048)}}},
		{"a directory over a link", [][2]string{{"l", "link:OUTSIDE"}, {"l", "dir"}, {"l/out", "x"}}},
		{"a file before its directory", [][2]string{{"d/out", "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
			must(t, os.Mkdir(ws, 0o755))
			must(t, os.Mkdir(outside, 0o755))
			for i := range tc.entries {
				tc.entries[i][1] = strings.ReplaceAll(tc.entries[i][1], "OUTSIDE", outside)
			}
			if err := untar(ws, bytes.NewReader(tarOf(t, tc.entries...)), 1024); err == nil {
				t.Error("untar took it")
			}
			if ents, _ := os.ReadDir(outside); len(ents) > 0 {
				t.Errorf("written outside the workspace: %v", ents)
			}
			if _, err := os.Lstat(filepath.Join(base, "out")); err == nil {
				t.Error("written beside the workspace")
			}
		})
	}
}

// FuzzUntar: whatever the daemon's answer holds, nothing is written
// outside the workspace and nothing panics.
func FuzzUntar(f *testing.F) {
	f.Add(tarOf(f, [2]string{"a", "dir"}, [2]string{"a/b", "x"}, [2]string{"l", "link:a/b"}))
	f.Add(tarOf(f, [2]string{"l", "link:../x"}, [2]string{"l/y", "x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		ws := filepath.Join(base, "ws")
		must(t, os.Mkdir(ws, 0o755))
		_ = untar(ws, bytes.NewReader(data), 1<<20)
		ents, err := os.ReadDir(base)
		must(t, err)
		if len(ents) != 1 {
			t.Fatalf("written beside the workspace: %v", ents)
		}
	})
}
