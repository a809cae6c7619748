package gitserve

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/gitref"
)

// A workspace image holds its commit's index as git's split index: the
// entries in .git/sharedindex.<hex>, written once into the image, and a
// small .git/index that links to it. A tip's difference then carries an
// index split against the same shared part: only the entries the tip
// changed, a few kilobytes where the whole index of a 10,000-file tree is
// a megabyte that every sandbox of a start would write. Both sides make
// the shared part the same way (splitIndexFrom): git writes the same
// bytes for the same tree, so its name (its checksum) says whether the
// image's and the service's are the same; when they are not the whole
// index is sent, as without an image's shared index.

// splitConfig makes git keep an index split: it never folds the changed
// entries into a new shared part, which the runner would lack.
func splitConfig() []string {
	return []string{"-c", "core.splitIndex=true", "-c", "splitIndex.maxPercentChange=100"}
}

// splitIndexFrom writes commit's index (version 4, no stat data) as a
// split index in the git directory gitDir (run from dir): its index and
// its sharedindex.<hex>. It returns the hex.
func splitIndexFrom(ctx context.Context, dir, gitDir, commit string) (string, error) {
	env := indexEnv(gitDir)
	if _, err := mirrorGit.RunEnv(ctx, dir, env, "-c", "index.version=4", "read-tree", commit); err != nil {
		return "", fmt.Errorf("read the commit's tree into an index: %w", err)
	}
	if _, err := mirrorGit.RunEnv(ctx, dir, env, append(splitConfig(), "update-index", "--split-index")...); err != nil {
		return "", fmt.Errorf("split the index: %w", err)
	}
	return gitref.SharedIndex(gitDir)
}

// indexEnv points git at the git directory gitDir and its index.
func indexEnv(gitDir string) []string {
	return []string{"GIT_DIR=" + gitDir, "GIT_INDEX_FILE=" + filepath.Join(gitDir, "index")}
}

// scratchGitDir makes an empty git directory under tmp that reads its
// objects from mirror: git writes a split index's shared part beside the
// repository's index, never into the mirror.
func scratchGitDir(mirror, tmp string) (string, error) {
	g := filepath.Join(tmp, "split.git")
	for _, d := range []string{"refs", "objects/info"} {
		if err := os.MkdirAll(filepath.Join(g, d), 0o700); err != nil {
			return "", err
		}
	}
	objects := filepath.Join(mirror, "objects")
	if _, err := os.Stat(objects); err != nil {
		objects = filepath.Join(mirror, ".git", "objects") // a checkout, not a mirror
	}
	abs, err := filepath.Abs(objects)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(g, "objects", "info", "alternates"), []byte(abs+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(g, "HEAD"), []byte("ref: refs/heads/main\n"), 0o600); err != nil {
		return "", err
	}
	return g, nil
}

// treeChange is one path of tip's tree that differs from base's: its new
// mode and object, mode "0" when tip deleted it.
type treeChange struct {
	mode, oid, path string
	added           bool
}

// splitTipIndex writes, in a scratch git directory under tmp, tip's index
// split against the service's shared index of base (its hex: shared):
// base's split index with changes applied and skipped marked
// skip-worktree.
func splitTipIndex(ctx context.Context, mirror, tmp, base string, changes []treeChange, skipped []string) (index, shared string, err error) {
	g, err := scratchGitDir(mirror, tmp)
	if err != nil {
		return "", "", err
	}
	if shared, err = splitIndexFrom(ctx, g, g, base); err != nil {
		return "", "", err
	}
	var info bytes.Buffer
	for _, c := range changes {
		fmt.Fprintf(&info, "%s %s\t%s\x00", c.mode, c.oid, c.path)
	}
	env := indexEnv(g)
	if _, err := mirrorGit.RunInput(ctx, g, env, &info, append(splitConfig(), "update-index", "-z", "--index-info")...); err != nil {
		return "", "", err
	}
	if err := markSkipped(ctx, g, tmp, skipped, env, splitConfig()...); err != nil {
		return "", "", err
	}
	// git writes another shared part if it chose to fold the index anew:
	// then the runner lacks it.
	if h, err := gitref.SharedIndex(g); err != nil || h != shared {
		return "", "", fmt.Errorf("the tip's index is no longer split against %s (%v)", shared, err)
	}
	return filepath.Join(g, "index"), shared, nil
}

// sharedSuffix names, beside a difference's tar, the file that says
// which shared index its index is split against (no file: a whole index).
const sharedSuffix = ".shared"

// readShared is the shared index a made difference's index is split
// against ("": a whole index).
func readShared(tarPath string) string {
	b, err := os.ReadFile(tarPath + sharedSuffix)
	if err != nil {
		return ""
	}
	h := strings.TrimSpace(string(b))
	if !gitref.ValidOID(h) {
		return ""
	}
	return h
}
