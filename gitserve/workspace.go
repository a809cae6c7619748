package gitserve

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
)

// A container's clone is most of its way from its start to its first
// story, and nearly all of a clone's CPU is the client's own processes
// (clone, remote-http, index-pack, the connectivity check, checkout): a
// fan-out of eight clones on two cores waits its turn for a core. The
// service therefore makes each branch's workspace once, as a tar of a
// shallow clone checked out, and a runner unpacks it in its own process.
// It holds what the runner's clone would (the branch's tip, or the
// default branch's when the branch is new), from the same mirror, to the
// same token, less what no runner uses (unusedInAClone).
const (
	workspacesDir = "workspaces"
	// keepWorkspacesFor is how long a made workspace is kept after it was
	// made: the containers of a start (and a resume's, each with a branch
	// of its own) ask within seconds of their grants, and a repository's
	// workspace may be large; one asked for later is made again.
	keepWorkspacesFor = 10 * time.Minute
	// workspaceBuildTime bounds making one workspace; it does not end
	// with the request that began it (others may wait on it).
	workspaceBuildTime = 5 * time.Minute
)

// workspaces makes each (ref, tip) once however many runners ask at once,
// and ahead of them from Grant.
type workspaces struct {
	group  singleflight.Group
	ctx    context.Context // ended by stop: no workspace is made after Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	built  atomic.Int64 // workspaces made, for tests and logs
}

func newWorkspaces() *workspaces {
	ctx, cancel := context.WithCancel(context.Background())
	return &workspaces{ctx: ctx, cancel: cancel}
}

// stop ends the workspaces being made ahead and waits for them.
func (ws *workspaces) stop() {
	ws.cancel()
	ws.wg.Wait()
}

// prepareWorkspace makes the workspace of a container's branch while its
// container is created, so that its runner, once it asks, finds it made
// (or being made: it waits on the same one).
func (s *Service) prepareWorkspace(key, branch string) {
	s.workspaces.ahead(func(ctx context.Context) {
		f, _, err := s.workspaceTar(ctx, key, branch)
		if err != nil {
			s.log.Debug("no ready-made workspace ahead of the runner", "swarm", key, "branch", branch, "err", err)
			return
		}
		_ = f.Close()
	})
}

// ahead runs work on its own goroutine, within workspaceBuildTime, unless
// the workspaces are stopped; stop waits for it.
func (ws *workspaces) ahead(work func(ctx context.Context)) {
	if ws.ctx.Err() != nil {
		return
	}
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		ctx, cancel := context.WithTimeout(ws.ctx, workspaceBuildTime)
		defer cancel()
		work(ctx)
	}()
}

// errWorkspaceTooBig: the runner clones instead.
var errWorkspaceTooBig = errors.New("the workspace is larger than a ready-made one may be")

// serveWorkspace answers contract.WorkspacePath: the ready-made workspace
// of rec's branch.
func (s *Service) serveWorkspace(w http.ResponseWriter, r *http.Request, rec record) {
	if r.Method != http.MethodGet {
		deny(w, http.StatusMethodNotAllowed, "aimi git service: a workspace is fetched with GET")
		return
	}
	if b := r.Header.Get(contract.WorkspaceBranchHeader); b != rec.Branch {
		deny(w, http.StatusConflict, "aimi git service: this token's workspace is for another branch; clone instead")
		return
	}
	release, ok := s.slots.acquire(r.Context(), rec.sandbox())
	if !ok {
		deny(w, http.StatusServiceUnavailable, "aimi git service: too many git requests at once; clone instead")
		return
	}
	defer release()
	if base := r.Header.Get(contract.WorkspaceBaseHeader); base != "" {
		s.answerBase(w, r, rec, base)
		return
	}
	f, exists, err := s.workspaceTar(r.Context(), rec.SwarmKey, rec.Branch)
	if err != nil {
		s.log.Info("no ready-made workspace; the runner clones", "container", rec.Container, "branch", rec.Branch, "err", err)
		deny(w, http.StatusNotFound, "aimi git service: no ready-made workspace; clone instead")
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		deny(w, http.StatusInternalServerError, "aimi git service: cannot read the workspace; clone instead")
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.Header().Set(contract.WorkspaceExistsHeader, strconv.FormatBool(exists))
	if _, err := io.Copy(w, f); err != nil {
		s.log.Info("sending a workspace broke off", "container", rec.Container, "err", err)
		return
	}
	s.log.Debug("workspace sent", "container", rec.Container, "branch", rec.Branch, "existed", exists, "bytes", st.Size())
}

// answerBase answers a runner whose image holds a workspace at commit
// base: no tar, only whether the branch's tip (or the default branch's)
// is base, and which tip to fetch when it is not.
func (s *Service) answerBase(w http.ResponseWriter, r *http.Request, rec record, base string) {
	tip, exists, err := s.branchTip(r.Context(), rec.SwarmKey, rec.Branch)
	if err != nil {
		s.log.Info("no workspace tip for a prefilled workspace", "container", rec.Container, "branch", rec.Branch, "err", err)
		deny(w, http.StatusNotFound, "aimi git service: the branch has no tip; clone instead")
		return
	}
	w.Header().Set(contract.WorkspaceExistsHeader, strconv.FormatBool(exists))
	w.Header().Set(contract.WorkspaceSameHeader, strconv.FormatBool(tip == base))
	w.Header().Set(contract.WorkspaceTipHeader, tip)
	var f *os.File
	if tip != base {
		sparse := !exists && r.Header.Get(contract.WorkspaceSparseHeader) == "true"
		shared := r.Header.Get(contract.WorkspaceSharedIndexHeader)
		if f, err = s.deltaTar(r.Context(), rec.SwarmKey, base, tip, sparse, shared); err != nil {
			s.log.Info("no ready-made difference; the runner fetches the tip", "container", rec.Container, "base", base, "tip", tip, "err", err)
		}
	}
	if f == nil {
		w.Header().Set(contract.WorkspaceDeltaHeader, "false")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		deny(w, http.StatusInternalServerError, "aimi git service: cannot read the difference; clone instead")
		return
	}
	w.Header().Set(contract.WorkspaceDeltaHeader, "true")
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	if _, err := io.Copy(w, f); err != nil {
		s.log.Info("sending a workspace's difference broke off", "container", rec.Container, "err", err)
	}
}

// branchTip is the tip of branch in swarm key's mirror, or of its default
// branch when the mirror does not hold branch (exists false).
func (s *Service) branchTip(ctx context.Context, key, branch string) (tip string, exists bool, err error) {
	mirror := s.mirrorPath(key)
	if branch != "" {
		if tip, err = refTip(ctx, mirror, "refs/heads/"+branch); err != nil {
			return "", false, err
		}
	}
	if tip != "" {
		return tip, true, nil
	}
	if tip, err = refTip(ctx, mirror, "HEAD"); err != nil || tip == "" {
		return "", false, fmt.Errorf("the repository's default branch has no commit (%v)", err)
	}
	return tip, false, nil
}

// DefaultWorkspace is the ready-made workspace of swarm's default branch
// (made if its tip has none yet) and that tip: what a workspace image
// holds (package workspace). The caller closes f.
func (s *Service) DefaultWorkspace(ctx context.Context, swarmID string) (f *os.File, tip string, err error) {
	tip, _, err = s.branchTip(ctx, swarmID, "")
	if err != nil {
		return nil, "", err
	}
	f, _, err = s.workspaceTar(ctx, swarmID, "")
	return f, tip, err
}

// workspaceTar opens the ready-made workspace of branch in swarm key's
// mirror, making it first if its tip has none yet. exists says whether the
// mirror holds branch (else the workspace is the default branch's).
func (s *Service) workspaceTar(ctx context.Context, key, branch string) (f *os.File, exists bool, err error) {
	mirror := s.mirrorPath(key)
	ref, tip := "refs/heads/"+branch, ""
	if branch != "" {
		if tip, err = refTip(ctx, mirror, ref); err != nil {
			return nil, false, err
		}
	}
	exists = tip != ""
	if !exists {
		ref = "HEAD"
		if tip, err = refTip(ctx, mirror, ref); err != nil || tip == "" {
			return nil, false, fmt.Errorf("the repository's default branch has no commit (%v)", err)
		}
	}
	sum := sha256.Sum256([]byte(ref + "\x00" + tip))
	dst := filepath.Join(s.dir, workspacesDir, key, hex.EncodeToString(sum[:12])+".tar")
	if f, err := os.Open(dst); err == nil {
		return f, exists, nil
	}
	_, err, _ = s.workspaces.group.Do(dst, func() (any, error) {
		if _, err := os.Stat(dst); err == nil {
			return nil, nil // made by the call before this one
		}
		// Not the asking request's context: others may wait on it.
		bctx, cancel := context.WithTimeout(s.workspaces.ctx, workspaceBuildTime)
		defer cancel()
		if !exists {
			branch = ""
		}
		return nil, s.buildWorkspace(bctx, mirror, branch, tip, dst)
	})
	if err != nil {
		return nil, false, err
	}
	f, err = os.Open(dst)
	return f, exists, err
}

// buildWorkspace writes dst: a tar of a shallow clone of branch ("" for
// the default branch, whose tip is tip) of mirror, whose origin is
// contract.WorkspaceOrigin. Nothing is written for a workspace past
// Limits.MaxWorkspace (errWorkspaceTooBig).
func (s *Service) buildWorkspace(ctx context.Context, mirror, branch, tip, dst string) error {
	// Counted in the mirror first: a tree past the bound is not cloned.
	if _, err := workspaceCost(ctx, mirror, tip, s.limits.MaxWorkspace); err != nil {
		return fmt.Errorf("make a workspace: %w", err)
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make the workspaces directory: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return fmt.Errorf("make a workspace: %w", err)
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "w")
	if err := cloneWithin(ctx, mirror, branch, work, s.limits.MaxWorkspace); err != nil {
		return fmt.Errorf("make a workspace: %w", err)
	}
	// A workspace image's index is split: its shared part is written once
	// into the image, and a tip's difference carries only the entries
	// that changed (splitindex.go). Without it, the whole index is sent.
	if h, err := splitIndexFrom(ctx, work, filepath.Join(work, ".git"), "HEAD"); err != nil {
		s.log.Info("a workspace's index is not split; differences from it send the whole index", "err", err)
	} else if err := os.Chmod(filepath.Join(work, ".git", gitref.SharedIndexFile(h)), 0o444); err != nil {
		// Read-only, it stays root's in an image (the engine's
		// ImageBuild), so git's freshening of its time on every read
		// does not copy it into each sandbox.
		return fmt.Errorf("make a workspace: %w", err)
	}
	// The reflogs name the daemon's own paths; a clone starts without.
	if err := os.RemoveAll(filepath.Join(work, ".git", "logs")); err != nil {
		return fmt.Errorf("make a workspace: %w", err)
	}
	leaveOutUnused(filepath.Join(work, ".git"))
	out, err := os.CreateTemp(dir, ".tar-")
	if err != nil {
		return fmt.Errorf("make a workspace: %w", err)
	}
	defer os.Remove(out.Name())
	err = writeTar(out, work, s.limits.MaxWorkspace)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("make a workspace: %w", err)
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		return fmt.Errorf("make a workspace: %w", err)
	}
	pruneWorkspaces(dir, keepWorkspacesFor)
	s.workspaces.built.Add(1)
	return nil
}

// cloneWithin makes work a shallow clone of branch of mirror and checks
// it out, if its .git and the files of its tip (counted again in the
// clone: the branch may have moved) take at most limit bytes.
func cloneWithin(ctx context.Context, mirror, branch, work string, limit int64) error {
	// The clone records the placeholder as origin; this command alone
	// reads it as the mirror (file:// so that --depth holds). No
	// template: the runner's git runs no hooks anyway. The rewrite goes
	// in the environment: -c takes a key up to its first "=", and the
	// mirror's path may hold one.
	args := []string{"clone", "--quiet", "--no-checkout", "--depth", "1", "--single-branch", "--no-tags", "--template="}
	if branch != "" {
		args = append(args, "--branch", branch)
	}
	env := []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=url.file://" + mirror + ".insteadOf", "GIT_CONFIG_VALUE_0=" + contract.WorkspaceOrigin}
	if _, err := mirrorGit.RunEnv(ctx, filepath.Dir(work), env, append(args, "--", contract.WorkspaceOrigin, work)...); err != nil {
		return err
	}
	gitBytes, err := diskUsage(filepath.Join(work, ".git"))
	if err != nil {
		return err
	}
	if gitBytes > limit {
		return fmt.Errorf("its .git takes %d bytes, more than %d (%s): %w", gitBytes, limit, KeyMaxWorkspace, errWorkspaceTooBig)
	}
	if _, err := workspaceCost(ctx, work, "HEAD", limit-gitBytes); err != nil {
		return err
	}
	_, err = mirrorGit.Run(ctx, work, "checkout", "--quiet")
	return err
}

// unusedInAClone are what a clone leaves in its .git that no runner
// needs, children before their directories: origin's HEAD (packed-refs
// names origin's branch, which git fetch updates) and empty directories
// (git makes them when it writes there). Each entry of the tar is a file
// every sandbox creates, on its way to its first story.
var unusedInAClone = []string{
	"refs/remotes/origin/HEAD", "refs/remotes/origin", "refs/remotes",
	"refs/tags", "objects/info",
}

// leaveOutUnused removes unusedInAClone from gitDir. A directory that is
// not empty stays (os.Remove fails), and so does anything else that
// cannot go: the workspace is whole either way.
func leaveOutUnused(gitDir string) {
	for _, p := range unusedInAClone {
		_ = os.Remove(filepath.Join(gitDir, filepath.FromSlash(p)))
	}
}

// writeTar writes the tree at root (directories, regular files, symbolic
// links, never followed) to w, failing past max bytes of file content.
func writeTar(w io.Writer, root string, max int64) error {
	tw := tar.NewWriter(w)
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if total += info.Size(); total > max {
				return errWorkspaceTooBig
			}
		case !info.IsDir():
			return nil // a clone makes no other kind of file
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		return copyFile(tw, path, info.Size())
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func copyFile(w io.Writer, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.CopyN(w, f, size)
	return err
}

// forgetWorkspaces removes swarm's ready-made workspaces (Forget).
func (s *Service) forgetWorkspaces(swarmID string) {
	if err := os.RemoveAll(filepath.Join(s.dir, workspacesDir, swarmID)); err != nil {
		s.log.Info("git service forget: the ready-made workspaces stay", "swarm", swarmID, "err", err)
	}
}

// pruneWorkspaces removes the tars in dir made longer than keepFor ago.
// A runner still reading a removed one reads on (its file stays open).
func pruneWorkspaces(dir string, keepFor time.Duration) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		info, err := e.Info()
		ext := filepath.Ext(e.Name())
		if err == nil && info.Mode().IsRegular() && (ext == ".tar" || ext == sharedSuffix) && time.Since(info.ModTime()) > keepFor {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
