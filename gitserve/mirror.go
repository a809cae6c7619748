package gitserve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// mirrorGit runs git on the service's mirrors with a hermetic config: the
// daemon user's global and system config (hooksPath, aliases, credential
// helpers) must not change what the service does.
var mirrorGit = gitcmd.Hermetic

func (s *Service) mirrorPath(key string) string { return filepath.Join(s.repos, key+".git") }

// preReceive is the mirrors' second gate, behind the pkt-line check of the
// HTTP handler: it refuses every ref but $AIMI_ALLOWED_REF, and deletions.
// Without the variable (receive-pack not started by the service) it refuses
// everything.
const preReceive = `#!/bin/sh
# Installed by aimid's git service. See package gitserve.
while read -r old new ref; do
	if [ -z "$AIMI_ALLOWED_REF" ] || [ "$ref" != "$AIMI_ALLOWED_REF" ]; then
		echo "aimi: push to $ref refused: this token may push only ${AIMI_ALLOWED_REF:-nothing}" >&2
		exit 1
	fi
	case "$new" in
	*[!0]*) ;;
	*) echo "aimi: deleting $ref is refused" >&2; exit 1 ;;
	esac
done
exit 0
`

// Prepare makes the bare mirror of swarm swarmID from repoPath, as its
// first Grant would: a start asks while it still reads its task files, so
// that copy (tens of milliseconds, git processes) is not on the way to its
// first container. Forget removes it again.
func (s *Service) Prepare(ctx context.Context, repoPath, swarmID string) error {
	if err := checkSwarmRepo("prepare", repoPath, swarmID); err != nil {
		return err
	}
	_, err := s.ensureMirror(ctx, repoPath, swarmID)
	return err
}

// checkSwarmRepo refuses a swarm id that cannot name its repository and a
// repository path that is not absolute; op names the call in the error.
func checkSwarmRepo(op, repoPath, swarmID string) error {
	switch {
	case !swarmKeyRe.MatchString(swarmID):
		return fmt.Errorf("git service %s: swarm id %q is not usable as a repository name", op, swarmID)
	case !filepath.IsAbs(repoPath):
		return fmt.Errorf("git service %s: repository path %q is not absolute", op, repoPath)
	}
	return nil
}

// ensureMirror returns the bare mirror of swarm key, cloning repoPath into
// it first if it does not exist, and otherwise bringing in the user's new
// commits. The clone is made under a temporary name and renamed, so a
// half-made mirror is never served. Where a mirror comes from is checked
// once and then remembered: every grant asks, under mirrorMu, and three git
// processes each made every create of a 16-container start wait 15-30 ms
// more than the one before; one (the user's refs, which can change between
// two grants) is left, and shared by the grants that waited for the same
// turn (refListings).
func (s *Service) ensureMirror(ctx context.Context, repoPath, key string) (string, error) {
	call := s.refs.join(repoPath)
	s.mirrorMu.Lock()
	defer s.mirrorMu.Unlock()
	dst := s.mirrorPath(key)
	known := s.sources[key] == repoPath
	if !known {
		if _, err := mirrorGit.Run(ctx, repoPath, "rev-parse", "--git-dir"); err != nil {
			return "", fmt.Errorf("git service: %q is not a git repository: %w", repoPath, err)
		}
	}
	userRefs, err := s.refs.list(ctx, repoPath, call)
	if err != nil {
		return "", fmt.Errorf("git service: list the branches of %q: %w", repoPath, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "HEAD")); err == nil {
		if !known {
			if src, _ := mirrorGit.Run(ctx, dst, "config", "--get", "aimi.source"); src != repoPath {
				return "", fmt.Errorf("git service: swarm %s's repository was made from %q, not %q", key, src, repoPath)
			}
			s.sources[key] = repoPath
		}
		if s.userRefs[key] != userRefs {
			s.refreshMirror(ctx, repoPath, key, dst)
			s.userRefs[key] = userRefs
		}
		return dst, nil
	}
	tmp, err := os.MkdirTemp(s.repos, ".tmp-"+key+"-")
	if err != nil {
		return "", fmt.Errorf("git service: make mirror dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "m.git")
	// The mirror's settings are written by the clone itself (--config):
	// a start's first grant waits for the mirror, and a git process
	// per setting came before it.
	steps := [][]string{
		{"clone", "--bare", "--quiet",
			"--config", "http.receivepack=true",
			"--config", "receive.denyDeletes=true",
			"--config", "receive.denyNonFastForwards=true",
			"--config", "uploadpack.allowFilter=true",
			"--config", "aimi.source=" + repoPath,
			"--", repoPath, work},
		{"-C", work, "remote", "remove", "origin"},
	}
	for _, args := range steps {
		if _, err := mirrorGit.Run(ctx, tmp, args...); err != nil {
			return "", fmt.Errorf("git service: make the mirror of %q: %w", repoPath, err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "hooks", "pre-receive"), []byte(preReceive), 0o755); err != nil {
		return "", fmt.Errorf("git service: install the mirror's pre-receive hook: %w", err)
	}
	// What the user's history takes does not count against
	// git.max_mirror: the first push's check takes the mirror's size as
	// its base (pushedBytes), the user's commits a refresh brought in
	// before it included. Not here: walking the mirror's files held every
	// grant of the start.
	if err := os.Rename(work, dst); err != nil {
		return "", fmt.Errorf("git service: place the mirror at %s: %w", dst, err)
	}
	s.userRefs[key] = userRefs
	s.sources[key] = repoPath
	s.log.Info("git service mirror created", "swarm", key, "from", repoPath)
	return dst, nil
}

// refreshMirror brings the user's new commits into an existing mirror (a
// swarm appended to later must see the task files committed since). Only
// fast-forwards and new refs: a branch a container pushed is never moved
// backwards or sideways, and git reports such refs as rejected, which is
// expected and only logged. The mirror keeps serving whatever happens.
func (s *Service) refreshMirror(ctx context.Context, repoPath, key, mirror string) {
	// Without a base yet (no push so far), the first push takes the whole
	// mirror as its base: nothing to measure here.
	var before int64
	_, berr := os.Stat(filepath.Join(mirror, baseName))
	if berr == nil {
		before, berr = dirBytes(mirror)
	}
	_, err := mirrorGit.Run(ctx, mirror, "fetch", "--quiet", "--no-tags", repoPath,
		"refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*")
	// The user's new commits are theirs: they do not count against the
	// swarm's git.max_mirror (a push under way at the same moment may be
	// counted as theirs too).
	if berr == nil {
		if after, aerr := dirBytes(mirror); aerr == nil {
			if werr := addBase(mirror, after-before); werr != nil {
				s.log.Info("git service: the user's new commits count against git.max_mirror", "swarm", key, "err", werr)
			}
		}
	}
	if err != nil {
		s.log.Info("git service mirror refreshed in part (refs that are not fast-forwards stay as they are)", "swarm", key, "from", repoPath, "detail", err)
		return
	}
	s.log.Debug("git service mirror refreshed", "swarm", key, "from", repoPath)
}

// branchTip reads refs/heads/<branch> in the mirror ("" when absent).
func branchTip(ctx context.Context, mirror, branch string) (string, error) {
	out, err := mirrorGit.Run(ctx, mirror, "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch)
	return strings.TrimSpace(out), err
}

// mirrorHasBranch reports whether the mirror holds refs/heads/<branch>
// (nil: it cannot tell), reading the ref files rather than starting a git
// for every grant (refTip). Unknown is never read as absent: a runner told
// "absent" starts the branch afresh from the default branch.
func mirrorHasBranch(ctx context.Context, mirror, branch string) *bool {
	tip, err := refTip(ctx, mirror, "refs/heads/"+branch)
	if err != nil {
		return nil
	}
	has := tip != ""
	return &has
}

// refTip is the commit ref (a branch, or HEAD) names in mirror ("" when it
// names none), read from the ref files the service's own git wrote, as
// mirrorHasBranch reads them: a fan-out's runners each ask for their
// workspace at once, and two git processes each on a loaded host came
// before their answers. Whatever the files do not say plainly (a reftable,
// HEAD detached, an unreadable file) is asked of git.
func refTip(ctx context.Context, mirror, ref string) (string, error) {
	viaGit := func() (string, error) { return mirrorGit.RevParse(ctx, mirror, ref) }
	if _, err := os.Stat(filepath.Join(mirror, "reftable")); err == nil {
		return viaGit()
	}
	name := ref
	if ref == "HEAD" {
		data, err := os.ReadFile(filepath.Join(mirror, "HEAD"))
		target, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "ref: ")
		if err != nil || !ok || !strings.HasPrefix(target, "refs/heads/") {
			return viaGit()
		}
		name = target
	}
	data, err := os.ReadFile(filepath.Join(mirror, filepath.FromSlash(name)))
	switch {
	case err == nil && gitref.ValidOID(strings.TrimSpace(string(data))):
		return strings.TrimSpace(string(data)), nil
	case !errors.Is(err, fs.ErrNotExist):
		return viaGit()
	}
	data, err = os.ReadFile(filepath.Join(mirror, "packed-refs"))
	switch {
	case err == nil:
		return packedRef(string(data), name), nil
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	}
	return viaGit()
}

// refListings lets the grants of a fan-out, which wait in turn for
// mirrorMu, share one listing of the user's refs: each grant joins the
// listing of its checkout that has not begun yet, and the first to get its
// turn runs it for all who joined. Every grant thus sees the refs as they
// were after it asked (a commit made before a start is never missed), and
// eight grants at once list twice, not eight times (a git process each, on
// the way to every container's task-request).
type refListings struct {
	mu      sync.Mutex
	pending map[string]*refListing // per checkout, the listing not begun yet
}

type refListing struct {
	done chan struct{}
	refs string
	err  error
}

func (r *refListings) join(repoPath string) *refListing {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[string]*refListing{}
	}
	c := r.pending[repoPath]
	if c == nil {
		c = &refListing{done: make(chan struct{})}
		r.pending[repoPath] = c
	}
	return c
}

// list returns c's refs, listing them unless a grant before this one did;
// callers hold mirrorMu. A shared listing that failed (its grant's context
// ended) is not taken: the caller lists again.
func (r *refListings) list(ctx context.Context, repoPath string, c *refListing) (string, error) {
	select {
	case <-c.done:
		if c.err == nil {
			return c.refs, nil
		}
		return listUserRefs(ctx, repoPath)
	default:
	}
	r.mu.Lock()
	if r.pending[repoPath] == c {
		delete(r.pending, repoPath)
	}
	r.mu.Unlock()
	c.refs, c.err = listUserRefs(ctx, repoPath)
	close(c.done)
	return c.refs, c.err
}

func listUserRefs(ctx context.Context, repoPath string) (string, error) {
	return mirrorGit.Run(ctx, repoPath, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags")
}
