package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// fillWorkspace makes the workspace hold the branch to work on (or the
// default branch it starts from: onBranch false). From the daemon's own git
// service it first takes the ready-made workspace (contract.WorkspacePath):
// one tar unpacked in this process instead of a clone's five git
// processes, which a fan-out runs in every sandbox at once on few cores.
// Anything amiss there (an older daemon, a workspace too big, a broken
// answer) leaves the workspace empty again and clones as before.
func (r *run) fillWorkspace(ctx context.Context) (onBranch bool, how string, err error) {
	if r.cfg.WorkspaceBase != "" {
		if r.cfg.DaemonGit {
			how, err := r.fillPrefilled(ctx)
			if err == nil {
				return true, how, nil // the branch is checked out
			}
			r.log.Info("the image's workspace is not used; emptying it", "err", err)
		}
		if err := emptyDir(r.cfg.Workspace); err != nil {
			return false, "", fmt.Errorf("empty the image's workspace: %w", err)
		}
	}
	if r.cfg.DaemonGit {
		exists, err := r.fetchWorkspace(ctx)
		if err == nil {
			return exists, "ready-made", nil
		}
		r.log.Info("no ready-made workspace; cloning", "err", err)
		if err := emptyDir(r.cfg.Workspace); err != nil {
			return false, "", fmt.Errorf("empty the workspace after a broken ready-made one: %w", err)
		}
	}
	onBranch, err = r.git.clone(ctx, r.req.BranchName, r.req.BranchExists, r.cfg.PushRetry)
	return onBranch, "clone", err
}

// fetchWorkspace unpacks the daemon's ready-made workspace of the branch
// into the (empty) workspace and names the request's repository as its
// origin. It returns whether the workspace holds the branch itself.
func (r *run) fetchWorkspace(ctx context.Context) (exists bool, err error) {
	if !configSafe(r.req.RepoURL) {
		return false, errors.New("the repository URL cannot be written into a git config as it is")
	}
	ch, err := newAskChannel(r.req.RepoURL, r.cfg.GitToken, r.cfg.CAFile, r.cfg.Dial, r.log)
	if err != nil {
		return false, err
	}
	defer ch.client.CloseIdleConnections()
	u, _ := url.Parse(ch.url)
	u.Path = contract.WorkspacePath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", ch.auth)
	req.Header.Set(contract.WorkspaceBranchHeader, r.req.BranchName)
	start := time.Now()
	resp, err := ch.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("fetch the workspace: %w", err)
	}
	answered := time.Since(start)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, fmt.Errorf("fetch the workspace: HTTP %d: %s", resp.StatusCode, oneLine(string(msg), 200))
	}
	exists, err = strconv.ParseBool(resp.Header.Get(contract.WorkspaceExistsHeader))
	if err != nil {
		return false, fmt.Errorf("fetch the workspace: no %s in the answer", contract.WorkspaceExistsHeader)
	}
	if err := os.MkdirAll(r.cfg.Workspace, 0o755); err != nil {
		return false, err
	}
	if err := untar(r.cfg.Workspace, resp.Body, contract.MaxWorkspaceBytes); err != nil {
		return false, fmt.Errorf("unpack the workspace: %w", err)
	}
	root, err := os.OpenRoot(r.cfg.Workspace)
	if err != nil {
		return false, err
	}
	defer root.Close()
	// Where a start's time goes between the claim and the first story.
	r.log.Info("ready-made workspace unpacked", "answer", answered.Round(time.Millisecond),
		"unpack", (time.Since(start) - answered).Round(time.Millisecond), "bytes", resp.ContentLength)
	return exists, setOrigin(root, r.req.RepoURL)
}

// configSafe: s can stand in a git config value without quoting.
func configSafe(s string) bool {
	return s != "" && strings.IndexFunc(s, func(c rune) bool {
		return c < 0x21 || c == 0x7f || c == '"' || c == '\\' || c == ';' || c == '#'
	}) < 0
}

// setOrigin replaces the placeholder origin of a ready-made workspace's
// config with repoURL (configSafe).
func setOrigin(root *os.Root, repoURL string) error {
	const name = ".git/config"
	data, err := root.ReadFile(name)
	if err != nil {
		return fmt.Errorf("read the workspace's git config: %w", err)
	}
	if bytes.Count(data, []byte(contract.WorkspaceOrigin)) != 1 {
		return errors.New("the workspace's git config does not name its origin once")
	}
	data = bytes.Replace(data, []byte(contract.WorkspaceOrigin), []byte(repoURL), 1)
	return root.WriteFile(name, data, 0o644)
}

// untar unpacks directories, regular files and symbolic links into the
// empty directory dir, at most max bytes of file content. Nothing is
// written outside dir: every name is clean and relative, every directory
// on its way was made by this unpack (entries come parents first), so none
// goes through a link, and nothing is overwritten (O_EXCL, O_NOFOLLOW).
// Plain paths, not os.Root: on the sandbox's fuse-overlayfs every
// directory os.Root opens on the way is a round trip to the filesystem's
// daemon, and eight sandboxes unpacking at once took up to half a second.
func untar(dir string, rd io.Reader, max int64) error {
	tr := tar.NewReader(rd)
	made := map[string]bool{".": true} // the directories this unpack made
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		switch {
		case !fs.ValidPath(name) || name == ".":
			return fmt.Errorf("entry %q: not a relative path", h.Name)
		case !made[path.Dir(name)]:
			return fmt.Errorf("entry %q: not in a directory made before it", h.Name)
		}
		full := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(full, 0o755)
			made[name] = err == nil
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, full)
		case tar.TypeReg:
			if total += h.Size; total > max {
				return fmt.Errorf("more than %d bytes", max)
			}
			err = writeEntry(full, fs.FileMode(h.Mode)&0o777, tr, h.Size)
		default:
			err = fmt.Errorf("entry %q: type %q is not unpacked", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func writeEntry(name string, mode fs.FileMode, src io.Reader, size int64) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, src, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// emptyDir removes what dir holds, keeping dir itself (it may be a mount).
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, e := range ents {
		if err := root.RemoveAll(e.Name()); err != nil {
			return err
		}
	}
	return nil
}
