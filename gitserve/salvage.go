package gitserve

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
)

// ContainerTrees reads a directory out of a container, running or stopped,
// as a tar stream whose entry names start with the directory's base name.
// *container.Docker satisfies it.
type ContainerTrees interface {
	ReadTree(ctx context.Context, containerName, dir string) (io.ReadCloser, error)
}

// ErrNoTrees: Salvage without Options.Trees (an engine that cannot read a
// sandbox's files).
var ErrNoTrees = errors.New("the git service cannot read containers' files on this engine")

// maxSalvageBytes bounds what Salvage extracts of a container's .git: its
// content comes from inside the sandbox.
const maxSalvageBytes = 4 << 30

// Salvage brings the branch of container sb out of the container itself (its workspace's .git, read through the engine) into
// the swarm's mirror, as if the container had pushed it: for work whose
// push never arrived (the runner's last push failed). Only objects and
// refs are taken from the container, never its configuration or hooks, and
// the branch moves only forward. It returns the branch's new tip.
func (s *Service) Salvage(ctx context.Context, sb contract.Sandbox, branch string) (string, error) {
	swarmID, containerName := sb.Swarm, sb.Container
	rec, ok := s.recordByName(sb)
	switch {
	case !ok:
		return "", fmt.Errorf("salvage %s: %w", containerName, ErrUnknownContainer)
	case rec.Branch != branch:
		return "", fmt.Errorf("salvage %s: it was granted branch %s, not %s", containerName, rec.Branch, branch)
	case s.opts.Trees == nil:
		return "", fmt.Errorf("salvage %s: %w", containerName, ErrNoTrees)
	}
	if err := gitref.CheckBranch(branch); err != nil {
		return "", fmt.Errorf("salvage %s: %w", containerName, err)
	}
	tmp, err := copyContainerGit(ctx, s.opts.Trees, containerName, s.repos)
	if err != nil {
		return "", fmt.Errorf("salvage %s: %w", containerName, err)
	}
	defer os.RemoveAll(tmp)
	ref := "refs/heads/" + branch
	s.mirrorMu.Lock()
	defer s.mirrorMu.Unlock()
	mirror := s.mirrorPath(swarmID)
	if _, err := mirrorGit.Run(ctx, mirror, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", tmp, ref+":"+ref); err != nil {
		return "", fmt.Errorf("salvage %s: bring %s into the swarm's repository (only a fast-forward is taken): %w", containerName, branch, err)
	}
	tip, err := branchTip(ctx, mirror, branch)
	if err != nil || tip == "" {
		return "", fmt.Errorf("salvage %s: read %s after the fetch: %v", containerName, branch, err)
	}
	s.notePush(sb, tip)
	s.log.Info("branch salvaged from the container", "container", containerName, "swarm", swarmID, "branch", branch, "tip", tip)
	return tip, nil
}

// extractGitDir writes HEAD, packed-refs, refs/ and objects/ of a .git tar
// stream into dir: regular files and directories only, no links, nothing
// outside those, no alternates, at most maxSalvageBytes in all.
func extractGitDir(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the container's .git: %w", err)
		}
		name := path.Clean(h.Name)
		rel, ok := strings.CutPrefix(name, ".git/")
		if !ok || !keepInGitDir(rel) {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxSalvageBytes {
				return fmt.Errorf("the container's .git is larger than %d bytes", int64(maxSalvageBytes))
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// keepInGitDir says which paths of a container's .git Salvage takes.
func keepInGitDir(rel string) bool {
	if rel == "" || rel == "." || strings.HasPrefix(rel, "../") || rel == ".." || path.IsAbs(rel) {
		return false
	}
	switch {
	case rel == "HEAD", rel == "packed-refs":
		return true
	case rel == "objects/info/alternates", rel == "objects/info/http-alternates":
		return false
	case rel == "refs" || strings.HasPrefix(rel, "refs/"), rel == "objects" || strings.HasPrefix(rel, "objects/"):
		return true
	}
	return false
}
