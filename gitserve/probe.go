package gitserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
)

// ContainerFiles reads one file out of a container, running or stopped;
// found is false when it does not exist and a file over max bytes is an
// error. *container.Docker satisfies it.
type ContainerFiles interface {
	ReadFile(ctx context.Context, containerName, file string, max int64) (data []byte, found bool, err error)
}

// EngineProbe is a TipProbe reading the branch out of the container's
// workspace clone through the engine, which works on stopped containers
// too (cleanup runs after they exited). It reads the loose ref first, then
// packed-refs; it runs nothing in the container.
type EngineProbe struct {
	Files     ContainerFiles
	Workspace string // default contract.DefaultWorkspace
}

// maxRefFile bounds what is read of a ref file or packed-refs: reading part
// of one could miss the branch and call the container's work absent.
const maxRefFile = 8 << 20

// BranchTip returns the object id refs/heads/<branch> has in the
// container's workspace, or "" when the workspace holds no repository at
// all (the runner failed before cloning). The workspace is the agent's: it
// may have deleted or renamed the branch, replaced the ref with a symlink or
// moved the repository's refs where this probe cannot read them. None of
// that may read as "nothing to lose": a missing branch falls back to what
// HEAD names (the clone's base when the runner stopped before branching,
// the agent's commits when it switched branches), and a HEAD or ref that
// cannot be resolved is an error, so the caller keeps the container.
func (p EngineProbe) BranchTip(ctx context.Context, containerName, branch string) (string, error) {
	tip, found, err := p.resolveRef(ctx, containerName, "refs/heads/"+branch)
	if err != nil || found {
		return tip, err
	}
	head, found, err := p.Files.ReadFile(ctx, containerName, path.Join(p.gitDir(), "HEAD"), maxRefFile)
	if err != nil {
		return "", fmt.Errorf("container %s: branch %s is not in the workspace and its HEAD cannot be read: %w", containerName, branch, err)
	}
	if !found {
		return "", nil // no repository: nothing was cloned, nothing was made
	}
	h := strings.TrimSpace(string(head))
	if gitref.ValidOID(h) {
		return h, nil // detached: what the agent made, if anything, is behind it
	}
	target, ok := strings.CutPrefix(h, "ref: ")
	if !ok || !strings.HasPrefix(target, "refs/") {
		return "", fmt.Errorf("container %s: branch %s is not in the workspace and its HEAD holds %q: cannot tell what it holds", containerName, branch, clip(h))
	}
	tip, found, err = p.resolveRef(ctx, containerName, target)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("container %s: neither branch %s nor HEAD's %s is a ref this probe can read (renamed, deleted or kept in a format it does not read): cannot tell what it holds", containerName, branch, clip(target))
	}
	return tip, nil
}

func (p EngineProbe) gitDir() string {
	ws := p.Workspace
	if ws == "" {
		ws = contract.DefaultWorkspace
	}
	return path.Join(ws, ".git")
}

// resolveRef reads ref as a loose ref, then from packed-refs.
func (p EngineProbe) resolveRef(ctx context.Context, containerName, ref string) (string, bool, error) {
	loose, found, err := p.Files.ReadFile(ctx, containerName, path.Join(p.gitDir(), ref), maxRefFile)
	if err != nil {
		return "", false, err
	}
	if found {
		tip := strings.TrimSpace(string(loose))
		if !gitref.ValidOID(tip) {
			return "", false, fmt.Errorf("container %s: %s in the workspace holds %q, not an object id", containerName, ref, clip(tip))
		}
		return tip, true, nil
	}
	packed, found, err := p.Files.ReadFile(ctx, containerName, path.Join(p.gitDir(), "packed-refs"), maxRefFile)
	if err != nil || !found {
		return "", false, err
	}
	tip := packedRef(string(packed), ref)
	return tip, tip != "", nil
}

// packedRef finds ref in the content of a packed-refs file ("" when it is
// not there). The file comes from inside a container: lines that are not
// "<oid> <ref>" (the header, peeled "^<oid>" lines, garbage) are skipped.
func packedRef(packed, ref string) string {
	sc := bufio.NewScanner(strings.NewReader(packed))
	sc.Buffer(make([]byte, 0, 4096), maxRefFile)
	for sc.Scan() {
		oid, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && gitref.ValidOID(oid) {
			return oid
		}
	}
	return ""
}

// Unreceived lists commits of containerName's branch that neither the
// service nor the user's checkout has. The rule:
//
//   - With a TipProbe (the daemon gives an EngineProbe, which reads the
//     branch out of the container's workspace, stopped or not), the
//     container's real branch tip is compared: no branch there, or a tip
//     reachable from a ref of the service's mirror or of the checkout
//     (NamedByRef), means nothing is missing; otherwise the
//     answer is that tip (the commits behind it exist only in the
//     container, so their number is unknown; the tip names them). A probe
//     that fails (engine down) is an error: the caller keeps the container.
//   - Without one, the service judges from what it
//     received: a container that pushed its branch at least once is
//     taken to have delivered its work (the runner pushes after every
//     story's commit and reports a failed push in its completion), so the
//     answer is none; one that never pushed gets ErrNothingReceived: its
//     work, if any, is unknown and the caller should keep it unless forced
//     (or remove it when it knows no story ran).
//
// A container the service never granted gets ErrUnknownContainer.
func (s *Service) Unreceived(ctx context.Context, cb contract.ContainerBranch) ([]string, error) {
	repoPath, containerName, branch := cb.Repo, cb.Container, cb.Branch
	rec, ok := s.recordByName(cb.Sandbox())
	if !ok {
		return nil, fmt.Errorf("unreceived commits of %s: %w", containerName, ErrUnknownContainer)
	}
	if rec.Branch != branch {
		return nil, fmt.Errorf("unreceived commits of %s: it was granted branch %s, not %s", containerName, rec.Branch, branch)
	}
	if s.opts.TipProbe == nil {
		if rec.Pushed {
			return nil, nil
		}
		return nil, fmt.Errorf("container %s, branch %s: %w; commits it made, if any, exist only in the container", containerName, branch, ErrNothingReceived)
	}
	tip, err := s.opts.TipProbe.BranchTip(ctx, containerName, branch)
	if err != nil {
		return nil, fmt.Errorf("unreceived commits of %s: read its branch %s: %w", containerName, branch, err)
	}
	if tip == "" {
		return nil, nil
	}
	if !gitref.ValidOID(tip) {
		return nil, fmt.Errorf("unreceived commits of %s: its branch %s reads %q, not an object id", containerName, branch, clip(tip))
	}
	for _, dir := range []string{s.mirrorPath(rec.SwarmKey), repoPath} {
		named, err := NamedByRef(ctx, dir, tip)
		if err != nil {
			return nil, fmt.Errorf("unreceived commits of %s: %w", containerName, err)
		}
		if named {
			return nil, nil
		}
	}
	return []string{tip}, nil
}

// NamedByRef reports whether commit oid is reachable from a ref of the
// repository at dir (a branch, a tag, a remote-tracking ref, a keep ref
// under contract.KeptRefPrefix). That, not the object being there, is what
// received means: objects no ref reaches (fetched by a publish that was then
// refused) go with the next git gc --prune. A dir that is not a repository
// (a mirror already forgotten) names nothing.
func NamedByRef(ctx context.Context, dir, oid string) (bool, error) {
	if !gitref.ValidOID(oid) {
		return false, fmt.Errorf("%q is not an object id", clip(oid))
	}
	if _, err := os.Stat(dir); err != nil {
		return false, nil
	}
	if _, err := mirrorGit.Run(ctx, dir, "cat-file", "-e", oid+"^{commit}"); err != nil {
		return false, nil
	}
	out, err := mirrorGit.Run(ctx, dir, "for-each-ref", "--count=1", "--format=%(refname)", "--contains", oid)
	if err != nil {
		return false, fmt.Errorf("find a ref of %s that holds commit %s: %w", dir, oid, err)
	}
	return strings.TrimSpace(out) != "", nil
}

// checkPublished returns ErrUnpublished, naming the branches and how to
// fetch them, when a branch of swarm key's mirror points at a commit no ref
// of its source checkout reaches (NamedByRef).
func (s *Service) checkPublished(ctx context.Context, key string) error {
	s.mirrorMu.Lock()
	defer s.mirrorMu.Unlock()
	mirror := s.mirrorPath(key)
	if _, err := os.Stat(filepath.Join(mirror, "HEAD")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	src, err := mirrorGit.Run(ctx, mirror, "config", "--get", "aimi.source")
	if err != nil || src == "" {
		return fmt.Errorf("git service forget %s: read the mirror's source checkout: %w (mirror kept at %s)", key, err, mirror)
	}
	refs, err := mirrorGit.Run(ctx, mirror, "for-each-ref", "--format=%(objectname) %(refname:short)", "refs/heads")
	if err != nil {
		return fmt.Errorf("git service forget %s: list the mirror's branches: %w (mirror kept at %s)", key, err, mirror)
	}
	var missing []string
	for _, line := range strings.Split(refs, "\n") {
		oid, branch, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		named, err := NamedByRef(ctx, src, oid)
		if err != nil {
			return fmt.Errorf("git service forget %s: %w (mirror kept at %s)", key, err, mirror)
		}
		if !named {
			missing = append(missing, branch)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("git service forget %s: %w: branch(es) %s; the mirror %s is kept: take them with 'git -C %s fetch %s %s'",
		key, ErrUnpublished, strings.Join(missing, ", "), mirror, src, mirror, "refs/heads/"+missing[0]+":refs/heads/"+missing[0])
}
