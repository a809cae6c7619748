package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
)

// fillPrefilled brings the workspace the sandbox's image holds (a
// workspace image: checked out at cfg.WorkspaceBase, origin
// contract.WorkspaceOrigin) to the branch to work on, which it leaves
// checked out. It asks the git service for the tip only (no tar): the
// image's own commit needs nothing but the branch's ref (no git process);
// another tip is fetched (only the objects the workspace lacks) and
// checked out (only the files that differ are written). On an error the
// caller empties the workspace and goes on as without an image.
func (r *run) fillPrefilled(ctx context.Context) (how string, err error) {
	if !configSafe(r.req.RepoURL) {
		return "", errors.New("the repository URL cannot be written into a git config as it is")
	}
	if fi, err := os.Lstat(filepath.Join(r.cfg.Workspace, ".git")); err != nil || !fi.IsDir() {
		return "", errors.New("the image's workspace holds no .git directory")
	}
	start := time.Now()
	same, exists, tip, delta, err := r.askTip(ctx)
	if err != nil {
		return "", err
	}
	if delta != nil {
		defer delta.Close()
	}
	answered := time.Since(start)
	root, err := os.OpenRoot(r.cfg.Workspace)
	if err != nil {
		return "", err
	}
	err = setOrigin(root, r.req.RepoURL)
	root.Close()
	if err != nil {
		return "", err
	}
	if same {
		// HEAD holds the tip already: the branch is a ref file away.
		if _, err := r.git.startBranch(ctx, r.req.BranchName); err != nil {
			return "", fmt.Errorf("name the branch: %w", err)
		}
		r.log.Info("image workspace at the tip", "answer", answered.Round(time.Millisecond), "commit", tip)
		return "image", nil
	}
	if delta != nil {
		// The service made the difference once for every sandbox: it is
		// written here, in this process.
		cr := &countingReader{r: delta}
		if err := applyDelta(r.cfg.Workspace, cr, contract.MaxWorkspaceBytes, r.req.TaskFilePath); err != nil {
			return "", fmt.Errorf("apply the difference: %w", err)
		}
		applied := time.Since(start)
		if err := moveHead(r.cfg.Workspace, tip); err != nil {
			return "", fmt.Errorf("move HEAD to the tip: %w", err)
		}
		if _, err := r.git.startBranch(ctx, r.req.BranchName); err != nil {
			return "", fmt.Errorf("name the branch: %w", err)
		}
		r.log.Info("image workspace brought to the tip", "answer", answered.Round(time.Millisecond),
			"apply", (applied - answered).Round(time.Millisecond), "bytes", cr.n, "refs", (time.Since(start) - applied).Round(time.Millisecond), "from", r.cfg.WorkspaceBase, "tip", tip)
		return "image+delta", nil
	}
	ref := "HEAD"
	if exists {
		ref = "refs/heads/" + r.req.BranchName
	}
	if err := r.fetchTip(ctx, ref); err != nil {
		return "", err
	}
	r.log.Info("image workspace brought to the tip", "answer", answered.Round(time.Millisecond),
		"fetch", (time.Since(start) - answered).Round(time.Millisecond), "from", r.cfg.WorkspaceBase, "tip", tip)
	return "image+fetch", nil
}

// askTip asks the git service whether the branch's tip (or the default
// branch's: exists false) is the image's commit; when it is not, delta is
// the difference's tar if the service made one (the caller closes it),
// else nil.
func (r *run) askTip(ctx context.Context) (same, exists bool, tip string, delta io.ReadCloser, err error) {
	ch, err := newAskChannel(r.req.RepoURL, r.cfg.GitToken, r.cfg.CAFile, r.cfg.Dial, r.log)
	if err != nil {
		return false, false, "", nil, err
	}
	u, _ := url.Parse(ch.url)
	u.Path = contract.WorkspacePath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		ch.client.CloseIdleConnections()
		return false, false, "", nil, err
	}
	req.Header.Set("Authorization", ch.auth)
	req.Header.Set(contract.WorkspaceBranchHeader, r.req.BranchName)
	req.Header.Set(contract.WorkspaceBaseHeader, r.cfg.WorkspaceBase)
	req.Header.Set(contract.WorkspaceSparseHeader, "true")
	// None, or more than one: the service sends the whole index.
	if h, err := gitref.SharedIndex(filepath.Join(r.cfg.Workspace, ".git")); err == nil {
		req.Header.Set(contract.WorkspaceSharedIndexHeader, h)
	}
	resp, err := ch.client.Do(req)
	if err != nil {
		ch.client.CloseIdleConnections()
		return false, false, "", nil, fmt.Errorf("ask for the tip: %w", err)
	}
	body := closeBoth{resp.Body, ch.client.CloseIdleConnections}
	same, serr := strconv.ParseBool(resp.Header.Get(contract.WorkspaceSameHeader))
	exists, eerr := strconv.ParseBool(resp.Header.Get(contract.WorkspaceExistsHeader))
	hasDelta := resp.Header.Get(contract.WorkspaceDeltaHeader) == "true"
	tip = resp.Header.Get(contract.WorkspaceTipHeader)
	switch {
	case resp.StatusCode != http.StatusOK:
		err = fmt.Errorf("ask for the tip: HTTP %d", resp.StatusCode)
	case serr != nil || eerr != nil || !gitref.ValidOID(tip):
		err = errors.New("ask for the tip: the service's answer does not say it (an older daemon)")
	case !same && hasDelta:
		return false, exists, tip, body, nil
	}
	body.Close()
	return same, exists, tip, nil, err
}

// closeBoth closes a response's body and its client's connections.
type closeBoth struct {
	io.ReadCloser
	idle func()
}

func (c closeBoth) Close() error {
	err := c.ReadCloser.Close()
	c.idle()
	return err
}

// fetchTip fetches ref's tip into the workspace (one commit deep; the
// objects the workspace holds are not sent again) and checks the branch
// out at it.
func (r *run) fetchTip(ctx context.Context, ref string) error {
	u, end, err := r.git.remote()
	if err != nil {
		return err
	}
	_, err = r.git.run(ctx, "fetch", "--quiet", "--depth", "1", "--no-tags", u, ref)
	if s := end(); err != nil && s.upstreamErr != nil {
		err = fmt.Errorf("%w (the repository was unreachable: %v)", err, s.upstreamErr)
	}
	if err != nil {
		return fmt.Errorf("fetch the tip: %w", err)
	}
	if _, err := r.git.run(ctx, "checkout", "--quiet", "-B", r.req.BranchName, "FETCH_HEAD"); err != nil {
		return fmt.Errorf("check the tip out: %w", err)
	}
	return nil
}

// countingReader counts what was read.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
