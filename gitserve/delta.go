package gitserve

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/tasks"
)

// A sandbox of a workspace image holds its repository checked out at the
// image's commit (base); a start's tip is usually a commit or two past it
// (the task files the user just committed). Its difference is made here,
// once for every sandbox of the start, as a tar the runner applies in its
// own process (no git process in the sandbox): the files the tip changed
// or added, the paths it deleted (contract.WorkspaceDeletedEntry), a pack
// of the objects the base's shallow clone lacks and the tip's index.
const (
	// maxDeltaPaths bounds a difference sent as files: past it the
	// runner fetches the tip with git instead.
	maxDeltaPaths = 2000
)

// errNoDelta: the difference is not sent as a tar (the runner fetches).
var errNoDelta = errors.New("no ready-made difference")

// prepareDelta makes the difference from base to the tip of a
// container's branch (or of the default branch) while its container is
// created or claimed, so that its runner finds it made (or being made).
func (s *Service) prepareDelta(key, branch, base string) {
	s.workspaces.ahead(func(ctx context.Context) {
		tip, exists, err := s.branchTip(ctx, key, branch)
		if err != nil || tip == base {
			return
		}
		// A runner of this daemon's sandbox image asks for the sparse
		// difference when its branch is new (answerBase).
		f, err := s.deltaTar(ctx, key, base, tip, !exists)
		if err != nil {
			s.log.Debug("no ready-made difference ahead of the runner", "swarm", key, "branch", branch, "err", err)
			return
		}
		_ = f.Close()
	})
}

// deltaTar opens the difference from base to tip in swarm key's mirror,
// making it first (once, whoever asks); sparse: the task files it changed
// are marked skip-worktree (contract.WorkspaceSparseHeader).
func (s *Service) deltaTar(ctx context.Context, key, base, tip string, sparse bool) (*os.File, error) {
	if !gitref.ValidOID(base) || !gitref.ValidOID(tip) {
		return nil, fmt.Errorf("%w: not commit ids", errNoDelta)
	}
	sum := sha256.Sum256([]byte("delta\x00" + base + "\x00" + tip + "\x00" + strconv.FormatBool(sparse)))
	dst := filepath.Join(s.dir, workspacesDir, key, hex.EncodeToString(sum[:12])+".tar")
	if f, err := os.Open(dst); err == nil {
		return f, nil
	}
	_, err, _ := s.workspaces.group.Do(dst, func() (any, error) {
		if _, err := os.Stat(dst); err == nil {
			return nil, nil
		}
		bctx, cancel := context.WithTimeout(s.workspaces.ctx, workspaceBuildTime)
		defer cancel()
		return nil, s.buildDelta(bctx, s.mirrorPath(key), base, tip, dst, sparse)
	})
	if err != nil {
		return nil, err
	}
	return os.Open(dst)
}

// buildDelta writes dst: the difference from base (which must be an
// ancestor of tip: the clone's shallow boundary stays base) to tip.
func (s *Service) buildDelta(ctx context.Context, mirror, base, tip, dst string, sparse bool) error {
	if ok, err := mirrorGit.IsAncestor(ctx, mirror, base, tip); err != nil || !ok {
		return fmt.Errorf("%w: %s is not an ancestor of the tip (%v)", errNoDelta, base, err)
	}
	changed, deleted, err := treeDiff(ctx, mirror, base, tip)
	if err != nil {
		return err
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".delta-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	out, err := os.CreateTemp(dir, ".tar-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	d := delta{mirror: mirror, base: base, tip: tip, tmp: tmp, changed: changed, deleted: deleted, max: s.limits.MaxWorkspace}
	if sparse {
		d.skipped = skippable(changed)
	}
	err = writeDelta(ctx, out, d)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("make a workspace's difference: %w", err)
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		return err
	}
	pruneWorkspaces(dir, keepWorkspacesFor)
	return nil
}

// treeDiff lists the paths tip changed or added since base (files and
// links) and the ones it deleted. A submodule's change is not sent.
func treeDiff(ctx context.Context, mirror, base, tip string) (changed, deleted []string, err error) {
	out, err := mirrorGit.Run(ctx, mirror, "diff-tree", "-r", "-z", "--no-renames", "--raw", base, tip)
	if err != nil {
		return nil, nil, err
	}
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		meta, path := strings.Fields(f[i]), f[i+1]
		if len(meta) != 5 {
			return nil, nil, fmt.Errorf("%w: git diff-tree said %q", errNoDelta, f[i])
		}
		if strings.HasPrefix(meta[0], ":160000") || meta[1] == "160000" {
			return nil, nil, fmt.Errorf("%w: a submodule changed", errNoDelta)
		}
		if meta[4] == "D" || meta[1] == "000000" {
			deleted = append(deleted, path)
		} else {
			changed = append(changed, path)
		}
		if meta[4] == "T" {
			deleted = append(deleted, path) // a file that became a link, or back: made anew
		}
	}
	if len(changed)+len(deleted) > maxDeltaPaths {
		return nil, nil, fmt.Errorf("%w: %d paths differ", errNoDelta, len(changed)+len(deleted))
	}
	return changed, deleted, nil
}

// delta is what one difference is made of: tmp is a scratch directory;
// skipped (a sparse difference) the changed paths its index marks
// skip-worktree.
type delta struct {
	mirror, base, tip, tmp    string
	changed, deleted, skipped []string
	max                       int64
}

// skippable are the changed paths a sparse difference's runner need not
// write: task files (each sandbox works on its own).
func skippable(changed []string) []string {
	var out []string
	for _, p := range changed {
		if tasks.InDir(p) {
			out = append(out, p)
		}
	}
	return out
}

// writeDelta writes the difference's tar to w: the deleted paths' list
// first (then, when sparse, the skipped paths' list), then the changed
// files (git archive of tip, those paths only), the pack of what base's
// shallow clone lacks and tip's index.
func writeDelta(ctx context.Context, w io.Writer, d delta) error {
	mirror, base, tip, tmp, changed, max := d.mirror, d.base, d.tip, d.tmp, d.changed, d.max
	tw := tar.NewWriter(w)
	list := []byte(strings.Join(d.deleted, "\x00"))
	if err := addFile(tw, contract.WorkspaceDeletedEntry, 0o644, list); err != nil {
		return err
	}
	if d.skipped != nil {
		if err := addFile(tw, contract.WorkspaceSkippedEntry, 0o644, []byte(strings.Join(d.skipped, "\x00"))); err != nil {
			return err
		}
	}
	var total int64
	if len(changed) > 0 {
		args := []string{"archive", "--format=tar", tip, "--"}
		for _, p := range changed {
			args = append(args, ":(literal)"+p)
		}
		cmd := mirrorGit.Command(ctx, mirror, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		r, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		err = copyEntries(tw, tar.NewReader(r), &total, max)
		if werr := cmd.Wait(); err == nil && werr != nil {
			err = fmt.Errorf("git archive: %w: %s", werr, strings.TrimSpace(stderr.String()))
		}
		if err != nil {
			return err
		}
	}
	cmd := mirrorGit.Command(ctx, mirror, "pack-objects", "--revs", "-q", filepath.Join(tmp, "pack"))
	cmd.Stdin = strings.NewReader("--shallow " + base + "\n" + tip + "\n--not\n" + base + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git pack-objects: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	h := strings.TrimSpace(stdout.String())
	for _, ext := range []string{".pack", ".idx"} {
		if err := addPath(tw, ".git/objects/pack/pack-"+h+ext, filepath.Join(tmp, "pack-"+h+ext), 0o444, &total, max); err != nil {
			return err
		}
	}
	index := filepath.Join(tmp, "index")
	// Version 4 (prefix-compressed paths): each sandbox writes it, and
	// git keeps the version when it writes the index again; a 10,000-file
	// tree's index is about a megabyte in version 2.
	if _, err := mirrorGit.RunEnv(ctx, mirror, []string{"GIT_INDEX_FILE=" + index}, "-c", "index.version=4", "read-tree", tip); err != nil {
		return err
	}
	if err := markSkipped(ctx, mirror, index, tmp, d.skipped); err != nil {
		return err
	}
	if err := addPath(tw, ".git/index", index, 0o644, &total, max); err != nil {
		return err
	}
	return tw.Close()
}

// copyEntries copies git archive's files and links (its directories and
// its global header are the runner's to make or skip).
func copyEntries(tw *tar.Writer, tr *tar.Reader, total *int64, max int64) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink {
			continue
		}
		if *total += h.Size; *total > max {
			return errWorkspaceTooBig
		}
		h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime = 0, 0, "", "", time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

func addFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func addPath(tw *tar.Writer, name, path string, mode int64, total *int64, max int64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if *total += int64(len(data)); *total > max {
		return errWorkspaceTooBig
	}
	return addFile(tw, name, mode, data)
}

// markSkipped marks paths skip-worktree in the index file at index. git
// wants a work tree for it: an empty directory under tmp, which the mark
// does not look into.
func markSkipped(ctx context.Context, mirror, index, tmp string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	wt := filepath.Join(tmp, "worktree")
	if err := os.Mkdir(wt, 0o700); err != nil {
		return err
	}
	cmd := mirrorGit.Command(ctx, mirror, "update-index", "--skip-worktree", "-z", "--stdin")
	cmd.Env = append(cmd.Env, "GIT_INDEX_FILE="+index, "GIT_WORK_TREE="+wt)
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\x00") + "\x00")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git update-index --skip-worktree: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
