package gitserve

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// applyForTest applies a difference as the runner does (runner's
// applyDelta): the deleted paths first, then every entry written anew.
func applyForTest(t *testing.T, dir string, data []byte) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	h, err := tr.Next()
	if err != nil || h.Name != contract.WorkspaceDeletedEntry {
		t.Fatalf("first entry %v: %v", h, err)
	}
	list, _ := io.ReadAll(tr)
	for _, p := range strings.Split(string(list), "\x00") {
		if p != "" {
			os.Remove(filepath.Join(dir, p))
		}
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		full := filepath.Join(dir, h.Name)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.Remove(full)
		switch h.Typeflag {
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, full)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(full, b, os.FileMode(h.Mode)&0o777)
			}
		default:
			t.Fatalf("entry %s of type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeltaBringsAShallowCloneToTheTip: a depth-1 clone at base, with the
// difference to a tip two commits on applied (a file changed, one added
// in a new directory, one deleted, one made executable, a link, a file
// back at a blob of base's history that base's tree lacks) and its
// branch moved to the tip, is the tip checked out: status clean, HEAD's
// tree the tip's, fsck --strict clean, and only what differs was sent.
// Split: the clone's index is split as an image's is, the difference's
// index split against the same shared part (a fraction of the whole
// index), and git reads the two as the tip's index.
func TestDeltaBringsAShallowCloneToTheTip(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) { deltaToTheTip(t, split) })
	}
}

func deltaToTheTip(t *testing.T, split bool) {
	repo := newRepo(t)
	commitFile(t, repo, "old.txt", "v1\n")
	commitFile(t, repo, "gone.txt", "bye\n")
	base := commitFile(t, repo, "old.txt", "v2\n")
	clone := filepath.Join(t.TempDir(), "clone")
	mustGit(t, "", "clone", "-q", "--depth", "1", "--no-tags", "file://"+repo, clone)

	commitFile(t, repo, "old.txt", "v1\n") // a blob only base's history holds
	os.MkdirAll(filepath.Join(repo, "new", "deep"), 0o755)
	os.WriteFile(filepath.Join(repo, "new", "deep", "a.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("../old.txt", filepath.Join(repo, "new", "link"))
	mustGit(t, repo, "rm", "-q", "gone.txt")
	mustGit(t, repo, "add", "-A")
	mustGit(t, repo, "commit", "-q", "-m", "more")
	tip := mustGit(t, repo, "rev-parse", "HEAD")

	var imageShared string
	if split {
		var err error
		if imageShared, err = splitIndexFrom(t.Context(), clone, filepath.Join(clone, ".git"), "HEAD"); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	changes, changed, deleted, err := treeDiff(t.Context(), repo, base, tip)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := writeDelta(t.Context(), &buf, delta{mirror: repo, base: base, tip: tip, tmp: t.TempDir(), changes: changes,
		changed: changed, deleted: deleted, split: split, max: 1 << 30, log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if shared != imageShared {
		t.Fatalf("the difference's index is split against %q, the image's shared index is %q", shared, imageShared)
	}
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		names[h.Name] = true
	}
	for _, unchanged := range []string{"README.md"} {
		if names[unchanged] {
			t.Errorf("the difference holds %s, which did not change", unchanged)
		}
	}
	applyForTest(t, clone, buf.Bytes())
	if err := os.WriteFile(filepath.Join(clone, ".git", "refs", "heads", "main"), []byte(tip+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustGit(t, clone, "status", "--porcelain"); out != "" {
		t.Errorf("the workspace differs from the tip:\n%s", out)
	}
	if got, want := mustGit(t, clone, "rev-parse", "HEAD^{tree}"), mustGit(t, repo, "rev-parse", tip+"^{tree}"); got != want {
		t.Errorf("HEAD's tree %s, want the tip's %s", got, want)
	}
	mustGit(t, clone, "fsck", "--strict", "--no-progress")
	if fi, err := os.Stat(filepath.Join(clone, "new", "deep", "a.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("the new script is not executable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(clone, "gone.txt")); !os.IsNotExist(err) {
		t.Errorf("a deleted file stayed: %v", err)
	}
	if split {
		whole := filepath.Join(t.TempDir(), "whole")
		if out, err := gitOut(clone, []string{"GIT_INDEX_FILE=" + whole}, "read-tree", tip); err != nil {
			t.Fatalf("read-tree: %v\n%s", err, out)
		}
		wfi, _ := os.Stat(whole)
		sent := len(tarEntry(t, buf.Bytes(), ".git/index"))
		if wfi == nil || int64(sent) >= wfi.Size() {
			t.Errorf("the split index sent is %d bytes, the whole index %v", sent, wfi)
		}
	}
	// The clone goes on: a commit on the tip.
	commitFile(t, clone, "after.txt", "x\n")
}

// tarEntry is the content of name in the tar data.
func tarEntry(t *testing.T, data []byte, name string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		if h.Name == name {
			b, _ := io.ReadAll(tr)
			return b
		}
	}
	t.Fatalf("no %s in the tar", name)
	return nil
}
