package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/gitref"
)

// startBranch makes branch at HEAD's commit and checks it out, right after
// a clone of the default branch: what `git checkout -b` does there, where
// the index and the work tree already hold that commit, so only the new
// ref and HEAD change. Written here (through lock files renamed into
// place, as git writes them) it saves a git process on a new branch's way
// to its first story, which a fan-out pays in every sandbox at once. Any
// workspace other than the one a fresh clone leaves (HEAD naming a branch
// whose ref holds a commit, files ref storage, no such branch yet) is
// left to git, which then says what is wrong. It returns the commit.
func (g *git) startBranch(ctx context.Context, branch string) (string, error) {
	oid, err := g.writeBranch(branch)
	if err == nil {
		return oid, nil
	}
	g.log.Debug("new branch left to git checkout -b", "branch", branch, "why", err)
	if _, err := g.run(ctx, "checkout", "--quiet", "-b", branch); err != nil {
		return "", err
	}
	return g.head(ctx, branch)
}

// writeBranch writes refs/heads/branch with the commit HEAD's branch holds,
// then points HEAD at it. On an error the workspace is as the clone left
// it.
func (g *git) writeBranch(branch string) (string, error) {
	if !gitref.ValidBranch(branch) {
		return "", errors.New("not a branch name the runner writes itself")
	}
	gitDir := filepath.Join(g.dir, ".git")
	// Another ref storage (reftable) keeps refs elsewhere; a .git file
	// (a linked checkout) points elsewhere.
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		return "", errors.New("the workspace's .git is not a directory")
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "reftable")); err == nil {
		return "", errors.New("the workspace keeps its refs in a reftable")
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", err
	}
	from, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok || !strings.HasPrefix(from, "refs/heads/") {
		return "", errors.New("HEAD does not name a branch")
	}
	oid, found := readRefFile(gitDir, from)
	if !found {
		return "", fmt.Errorf("%s holds no commit in a ref file", from)
	}
	ref := "refs/heads/" + branch
	if _, exists := readRefFile(gitDir, ref); exists {
		return "", fmt.Errorf("%s exists already", ref)
	}
	path := filepath.Join(gitDir, filepath.FromSlash(ref))
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s is in the way", ref)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := writeLocked(path, oid+"\n"); err != nil {
		return "", err
	}
	if err := writeLocked(filepath.Join(gitDir, "HEAD"), "ref: "+ref+"\n"); err != nil {
		os.Remove(path) // git checkout -b then starts from the clone as it was
		return "", err
	}
	return oid, nil
}

// readRefFile is ref's commit from its loose file, else from packed-refs;
// found is false when neither holds it.
func readRefFile(gitDir, ref string) (oid string, found bool) {
	if data, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref))); err == nil {
		oid = strings.TrimSpace(string(data))
		return oid, gitref.ValidOID(oid)
	}
	packed, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(packed), "\n") {
		if o, name, ok := strings.Cut(line, " "); ok && name == ref && gitref.ValidOID(o) {
			return o, true
		}
	}
	return "", false
}

// writeLocked replaces path as git does: path.lock, created exclusively
// (another writer's lock fails it), renamed over path.
func writeLocked(path, content string) error {
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock, path)
	}
	if err != nil {
		os.Remove(lock)
	}
	return err
}
