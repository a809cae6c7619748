package runner

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
)

// applyDelta applies the git service's difference of a workspace image's
// tree to its tip (gitserve's writeDelta) to the workspace at dir: the
// paths of its first entry (contract.WorkspaceDeletedEntry) are removed,
// every other entry (a file or a link, the tip's pack and index among
// them) is written anew, at most max bytes of content. A sparse
// difference's skipped paths (contract.WorkspaceSkippedEntry) are not
// written, but for own (the runner's task file), whose skip-worktree mark
// is cleared in the index. Everything goes through an os.Root of dir:
// nothing is written outside it.
func applyDelta(dir string, rd io.Reader, max int64, own string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	a := &deltaApply{root: root, tr: tar.NewReader(rd), max: max, own: own, made: map[string]bool{}}
	h, err := a.tr.Next()
	if err != nil || h.Name != contract.WorkspaceDeletedEntry {
		return fmt.Errorf("the difference does not begin with its deleted paths (%v)", err)
	}
	deleted, err := a.list(h)
	if err != nil {
		return err
	}
	for _, p := range deleted {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %q: %w", p, err)
		}
	}
	for {
		h, err := a.tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := a.entry(h); err != nil {
			return err
		}
	}
}

// deltaApply is one difference being applied.
type deltaApply struct {
	root    *os.Root
	tr      *tar.Reader
	max     int64
	total   int64
	own     string
	skipped map[string]bool
	made    map[string]bool // directories made or found
}

// list reads a list entry's NUL-separated relative paths.
func (a *deltaApply) list(h *tar.Header) ([]string, error) {
	if h.Size > a.max-a.total {
		return nil, fmt.Errorf("the list %s is larger than the difference may be", h.Name)
	}
	data, err := io.ReadAll(io.LimitReader(a.tr, h.Size))
	if err != nil {
		return nil, err
	}
	a.total += h.Size
	if len(data) == 0 {
		return nil, nil
	}
	out := strings.Split(string(data), "\x00")
	for _, p := range out {
		if !fs.ValidPath(p) || p == "." {
			return nil, fmt.Errorf("listed path %q: not a relative path", p)
		}
	}
	return out, nil
}

// entry writes one entry of the difference (or records the skipped list).
func (a *deltaApply) entry(h *tar.Header) error {
	if h.Name == contract.WorkspaceSkippedEntry && a.skipped == nil {
		paths, err := a.list(h)
		a.skipped = map[string]bool{}
		for _, p := range paths {
			a.skipped[p] = true
		}
		return err
	}
	name := path.Clean(h.Name)
	if !fs.ValidPath(name) || name == "." || name != h.Name {
		return fmt.Errorf("entry %q: not a clean relative path", h.Name)
	}
	if a.skipped[name] && name != a.own {
		return nil // in the index, marked skip-worktree; never written here
	}
	if dir := path.Dir(name); !a.made[dir] {
		if err := a.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		a.made[dir] = true
	}
	if err := a.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replace %q: %w", name, err)
	}
	switch h.Typeflag {
	case tar.TypeSymlink:
		return a.root.Symlink(h.Linkname, name)
	case tar.TypeReg:
		if a.total += h.Size; a.total > a.max {
			return fmt.Errorf("more than %d bytes", a.max)
		}
		if name == ".git/index" && a.skipped[a.own] {
			return a.ownIndex(name, h)
		}
		return writeIn(a.root, name, fs.FileMode(h.Mode)&0o777, a.tr, h.Size)
	}
	return fmt.Errorf("entry %q: type %q is not applied", h.Name, h.Typeflag)
}

// ownIndex writes the index with the runner's own task file's
// skip-worktree mark cleared: it is written, and its changes must be
// committed.
func (a *deltaApply) ownIndex(name string, h *tar.Header) error {
	data, err := io.ReadAll(io.LimitReader(a.tr, h.Size))
	if err != nil {
		return err
	}
	found, err := clearSkipWorktree(data, a.own)
	if err != nil {
		return fmt.Errorf("the index: %w", err)
	}
	if !found {
		// Listed as skipped, yet no entry of that name carries the mark
		// (a split index's entry may carry no name): git would ignore
		// what the runner writes there.
		return fmt.Errorf("the index: no skip-worktree entry of %s, which the difference lists as skipped", a.own)
	}
	return writeIn(a.root, name, fs.FileMode(h.Mode)&0o777, bytes.NewReader(data), int64(len(data)))
}

func writeIn(root *os.Root, name string, mode fs.FileMode, src io.Reader, size int64) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, src, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// moveHead points the branch HEAD names in the workspace at dir to tip
// (a loose ref, which wins over packed-refs).
func moveHead(dir, tip string) error {
	if !gitref.ValidOID(tip) {
		return errors.New("not a commit id")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	head, err := root.ReadFile(".git/HEAD")
	if err != nil {
		return err
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok || !strings.HasPrefix(ref, "refs/heads/") || !gitref.ValidBranch(strings.TrimPrefix(ref, "refs/heads/")) {
		return errors.New("HEAD does not name a branch")
	}
	name := ".git/" + ref
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	return root.WriteFile(name, []byte(tip+"\n"), 0o644)
}
