package runner

import (
	"archive/tar"
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
// them) is written anew, at most max bytes of content. Everything goes
// through an os.Root of dir: nothing is written outside it.
func applyDelta(dir string, rd io.Reader, max int64) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(rd)
	h, err := tr.Next()
	if err != nil || h.Name != contract.WorkspaceDeletedEntry || h.Size > max {
		return fmt.Errorf("the difference does not begin with its deleted paths (%v)", err)
	}
	list, err := io.ReadAll(io.LimitReader(tr, h.Size))
	if err != nil {
		return err
	}
	total := h.Size
	if len(list) > 0 {
		for _, p := range strings.Split(string(list), "\x00") {
			if !fs.ValidPath(p) || p == "." {
				return fmt.Errorf("deleted path %q: not a relative path", p)
			}
			if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %q: %w", p, err)
			}
		}
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		if !fs.ValidPath(name) || name == "." || name != h.Name {
			return fmt.Errorf("entry %q: not a clean relative path", h.Name)
		}
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replace %q: %w", name, err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			err = root.Symlink(h.Linkname, name)
		case tar.TypeReg:
			if total += h.Size; total > max {
				return fmt.Errorf("more than %d bytes", max)
			}
			err = writeIn(root, name, fs.FileMode(h.Mode)&0o777, tr, h.Size)
		default:
			err = fmt.Errorf("entry %q: type %q is not applied", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
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
