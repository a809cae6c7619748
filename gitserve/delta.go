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
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/state"
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
		if !gitref.ValidOID(base) || !gitref.ValidOID(tip) {
			return
		}
		// A runner of this daemon's sandbox image asks for the sparse
		// difference when its branch is new, split against its image's
		// shared index, which the service made (answerBase).
		f, err := s.deltaTarMade(ctx, key, base, tip, !exists, true)
		if err != nil {
			s.log.Debug("no ready-made difference ahead of the runner", "swarm", key, "branch", branch, "err", err)
			return
		}
		_ = f.Close()
	})
}

// deltaTar opens the difference from base to tip in swarm key's mirror,
// making it first (once, whoever asks); sparse: the task files it added
// are marked skip-worktree (contract.WorkspaceSparseHeader). shared, when
// set, is the runner's shared index (contract.WorkspaceSharedIndexHeader):
// the difference's index is split against it when the service's shared
// index of base is the same, else whole.
func (s *Service) deltaTar(ctx context.Context, key, base, tip string, sparse bool, shared string) (*os.File, error) {
	if !gitref.ValidOID(base) || !gitref.ValidOID(tip) || (shared != "" && !gitref.ValidOID(shared)) {
		return nil, fmt.Errorf("%w: not commit ids", errNoDelta)
	}
	f, err := s.deltaTarMade(ctx, key, base, tip, sparse, shared != "")
	if err != nil || shared == "" {
		return f, err
	}
	if made := readShared(f.Name()); made == "" || made == shared {
		return f, nil
	}
	_ = f.Close()
	s.log.Info("the image's shared index is not the service's; sending the whole index", "base", base, "image", shared)
	return s.deltaTarMade(ctx, key, base, tip, sparse, false)
}

// deltaTarMade opens the difference made for (base, tip, sparse, split),
// making it first.
func (s *Service) deltaTarMade(ctx context.Context, key, base, tip string, sparse, split bool) (*os.File, error) {
	sum := sha256.Sum256([]byte("delta\x00" + base + "\x00" + tip + "\x00" + strconv.FormatBool(sparse) + "\x00" + strconv.FormatBool(split)))
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
		return nil, s.buildDelta(bctx, s.mirrorPath(key), base, tip, dst, sparse, split)
	})
	if err != nil {
		return nil, err
	}
	return os.Open(dst)
}

// buildDelta writes dst: the difference from base (which must be an
// ancestor of tip: the clone's shallow boundary stays base) to tip.
func (s *Service) buildDelta(ctx context.Context, mirror, base, tip, dst string, sparse, split bool) error {
	if ok, err := mirrorGit.IsAncestor(ctx, mirror, base, tip); err != nil || !ok {
		return fmt.Errorf("%w: %s is not an ancestor of the tip (%v)", errNoDelta, base, err)
	}
	changes, changed, deleted, err := treeDiff(ctx, mirror, base, tip)
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
	d := delta{mirror: mirror, base: base, tip: tip, tmp: tmp, changes: changes, changed: changed, deleted: deleted,
		split: split, max: s.limits.MaxWorkspace, log: s.log}
	if sparse {
		d.skipped = skippable(changes)
	}
	shared, err := writeDelta(ctx, out, d)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("make a workspace's difference: %w", err)
	}
	// Before the tar: a tar found made is read with what it says.
	if shared != "" {
		if err := os.WriteFile(dst+sharedSuffix, []byte(shared+"\n"), 0o600); err != nil {
			return err
		}
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		return err
	}
	pruneWorkspaces(dir, keepWorkspacesFor)
	return nil
}

// treeDiff lists what tip changed since base: each path's new mode and
// object (changes), the paths of files and links it changed or added
// (changed) and the ones it deleted. A submodule's change is not sent.
func treeDiff(ctx context.Context, mirror, base, tip string) (changes []treeChange, changed, deleted []string, err error) {
	out, err := mirrorGit.Run(ctx, mirror, "diff-tree", "-r", "-z", "--no-renames", "--raw", base, tip)
	if err != nil {
		return nil, nil, nil, err
	}
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		meta, path := strings.Fields(f[i]), f[i+1]
		if len(meta) != 5 {
			return nil, nil, nil, fmt.Errorf("%w: git diff-tree said %q", errNoDelta, f[i])
		}
		if strings.HasPrefix(meta[0], ":160000") || meta[1] == "160000" {
			return nil, nil, nil, fmt.Errorf("%w: a submodule changed", errNoDelta)
		}
		changes = append(changes, treeChange{mode: meta[1], oid: meta[3], path: path, added: meta[4] == "A"})
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
		return nil, nil, nil, fmt.Errorf("%w: %d paths differ", errNoDelta, len(changed)+len(deleted))
	}
	return changes, changed, deleted, nil
}

// delta is what one difference is made of: tmp is a scratch directory;
// skipped (a sparse difference) the changed paths its index marks
// skip-worktree; split: its index is split against the service's shared
// index of base.
type delta struct {
	mirror, base, tip, tmp    string
	changes                   []treeChange
	changed, deleted, skipped []string
	split                     bool
	max                       int64
	log                       *slog.Logger
}

// skippable are the paths a sparse difference's runner need not write:
// the task files the tip added (each sandbox works on its own) and the
// daemon's own files a repository without a .gitignore for them commits
// (the state file, journals: a start's commit holds the last start's). A
// task file the tip changed is written by every runner: in a split index
// its entry replaces the shared one and carries no path, so the runner
// could not find its own to clear its mark.
func skippable(changes []treeChange) []string {
	var out []string
	for _, c := range changes {
		if c.added && (tasks.InDir(c.path) || state.IsDaemonFile(c.path)) {
			out = append(out, c.path)
		}
	}
	return out
}

// writeDelta writes the difference's tar to w: the deleted paths' list
// first (then, when sparse, the skipped paths' list), then the changed
// files (git archive of tip, those paths only), the pack of what base's
// shallow clone lacks and tip's index. shared is the shared index that
// index is split against ("": whole).
func writeDelta(ctx context.Context, w io.Writer, d delta) (shared string, err error) {
	tw := tar.NewWriter(w)
	if err := addFile(tw, contract.WorkspaceDeletedEntry, 0o644, []byte(strings.Join(d.deleted, "\x00"))); err != nil {
		return "", err
	}
	if d.skipped != nil {
		if err := addFile(tw, contract.WorkspaceSkippedEntry, 0o644, []byte(strings.Join(d.skipped, "\x00"))); err != nil {
			return "", err
		}
	}
	var total int64
	if err := addChanged(ctx, tw, d, &total); err != nil {
		return "", err
	}
	if err := addPack(ctx, tw, d, &total); err != nil {
		return "", err
	}
	index, shared, err := tipIndex(ctx, d)
	if err != nil {
		return "", err
	}
	if err := addPath(tw, ".git/index", index, 0o644, &total, d.max); err != nil {
		return "", err
	}
	return shared, tw.Close()
}

// addChanged adds the files and links tip changed or added (git archive
// of tip, those paths only).
func addChanged(ctx context.Context, tw *tar.Writer, d delta, total *int64) error {
	if len(d.changed) == 0 {
		return nil
	}
	args := []string{"archive", "--format=tar", d.tip, "--"}
	for _, p := range d.changed {
		args = append(args, ":(literal)"+p)
	}
	cmd := mirrorGit.Command(ctx, d.mirror, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	r, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	err = copyEntries(tw, tar.NewReader(r), total, d.max)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("git archive: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return err
}

// addPack adds the pack of the objects base's shallow clone lacks.
func addPack(ctx context.Context, tw *tar.Writer, d delta, total *int64) error {
	revs := strings.NewReader("--shallow " + d.base + "\n" + d.tip + "\n--not\n" + d.base + "\n")
	out, err := mirrorGit.RunInput(ctx, d.mirror, nil, revs, "pack-objects", "--revs", "-q", filepath.Join(d.tmp, "pack"))
	if err != nil {
		return err
	}
	h := strings.TrimSpace(out)
	for _, ext := range []string{".pack", ".idx"} {
		if err := addPath(tw, ".git/objects/pack/pack-"+h+ext, filepath.Join(d.tmp, "pack-"+h+ext), 0o444, total, d.max); err != nil {
			return err
		}
	}
	return nil
}

// tipIndex writes tip's index under d.tmp: split against the service's
// shared index of base when asked and git can (shared: its hex), else
// whole.
func tipIndex(ctx context.Context, d delta) (index, shared string, err error) {
	if d.split {
		index, shared, err := splitTipIndex(ctx, d.mirror, d.tmp, d.base, d.changes, d.skipped)
		if err == nil {
			return index, shared, nil
		}
		d.log.Info("no split index for a workspace's difference; sending the whole index", "base", d.base, "tip", d.tip, "err", err)
	}
	index = filepath.Join(d.tmp, "index")
	// Version 4 (prefix-compressed paths): each sandbox writes it, and
	// git keeps the version when it writes the index again; a 10,000-file
	// tree's index is about a megabyte in version 2.
	env := []string{"GIT_INDEX_FILE=" + index}
	if _, err := mirrorGit.RunEnv(ctx, d.mirror, env, "-c", "index.version=4", "read-tree", d.tip); err != nil {
		return "", "", err
	}
	return index, "", markSkipped(ctx, d.mirror, d.tmp, d.skipped, env)
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

// markSkipped marks paths skip-worktree in the index that env names
// (GIT_INDEX_FILE), running git in dir with config before the command.
// git wants a work tree for it: an empty directory under tmp, which the
// mark does not look into.
func markSkipped(ctx context.Context, dir, tmp string, paths, env []string, config ...string) error {
	if len(paths) == 0 {
		return nil
	}
	wt := filepath.Join(tmp, "worktree")
	if err := os.Mkdir(wt, 0o700); err != nil {
		return err
	}
	_, err := mirrorGit.RunInput(ctx, dir, append(slices.Clip(env), "GIT_WORK_TREE="+wt), strings.NewReader(strings.Join(paths, "\x00")+"\x00"),
		append(slices.Clip(config), "update-index", "--skip-worktree", "-z", "--stdin")...)
	return err
}
