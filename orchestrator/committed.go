package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/tasks"
)

// The container never sees the user's working tree: it clones the
// repository (origin, or in local mode the git service's mirror of the
// checkout), checks out the task file's branch when the clone has it and
// creates it from the clone's HEAD otherwise, and reads the task file from
// there. So the daemon validates, and counts the stories of, that committed
// copy, and refuses a working-tree copy that is not committed or differs
// from it: what a user validated is then what runs. One difference is
// accepted: when the branch exists (a rerun) and its copy differs only in
// story statuses and notes, the branch's copy is taken, since those are the
// progress the runner wrote back.

// source is the revision whose tree the container will start from.
type source struct {
	rev    string // what git reads, e.g. refs/heads/feat/x
	desc   string // for messages: "branch feat/x", "origin's HEAD"
	branch bool   // the task file's own branch: a rerun
	remote bool   // the container clones origin: commits must be pushed
}

// errNoRev: the revision does not exist.
var errNoRev = errors.New("no such revision")

// gitReadTimeout bounds one git read: Start runs them holding the
// repository's lock, and status must not wait behind a git that hangs.
const gitReadTimeout = 30 * time.Second

// gitRead runs a read-only git command in repo and returns its standard
// output, at most limit bytes (more is an error).
func gitRead(ctx context.Context, repo string, limit int64, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, gitReadTimeout)
	defer cancel()
	cmd := gitcmd.Git{}.Command(ctx, repo, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run git: %w", err)
	}
	data, rerr := io.ReadAll(io.LimitReader(out, limit+1))
	if rerr == nil && int64(len(data)) > limit {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("git %s: more than %d bytes of output", args[0], limit)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", args[0], err, cutText(strings.TrimSpace(stderr.String()), 300))
	}
	return data, rerr
}

// hasCommit reports whether rev names a commit in repo. git failing for
// another reason (not a repository, one owned by another user) is an error.
func hasCommit(ctx context.Context, repo, rev string) (bool, error) {
	_, err := gitRead(ctx, repo, 128, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, nil // --verify --quiet: no such revision
	}
	return false, fmt.Errorf("read the repository with git: %w", err)
}

// sourceCandidates lists, best first, the revisions the container of
// branch may start from: the branch if the clone will have it, else the
// clone's HEAD. In remote mode the checkout's view of origin
// (refs/remotes/origin/*, as of the last fetch) stands for origin.
func sourceCandidates(branch string, local bool) []source {
	if local {
		return []source{
			{rev: "refs/heads/" + branch, desc: "branch " + branch, branch: true},
			{rev: "HEAD", desc: "the checkout's HEAD (branch " + branch + " does not exist yet)"},
		}
	}
	return []source{
		{rev: "refs/remotes/origin/" + branch, desc: "origin's branch " + branch, branch: true, remote: true},
		{rev: "refs/remotes/origin/HEAD", desc: "origin's HEAD (branch " + branch + " does not exist there yet)", remote: true},
		// Nothing known of origin (never fetched): the checkout's HEAD is
		// the best guess of what origin will serve.
		{rev: "HEAD", desc: "HEAD (nothing is known of origin's branches; run git fetch)", remote: true},
	}
}

// errNoCommit is containerSource's answer when no candidate is a commit.
func errNoCommit(local bool) error {
	if local {
		return errors.New("the repository has no commit yet; commit the task file first (the container reads it from git)")
	}
	return errors.New("the repository has no commit yet; commit and push the task file first (the container clones origin)")
}

// containerSource finds where the container will read the task file of
// branch: the first of sourceCandidates that is a commit.
func containerSource(ctx context.Context, repo, branch string, local bool) (source, error) {
	for _, c := range sourceCandidates(branch, local) {
		ok, err := hasCommit(ctx, repo, c.rev)
		if err != nil {
			return source{}, err
		}
		if ok {
			return c, nil
		}
	}
	return source{}, errNoCommit(local)
}

// readCommitted reads the task file path from rev with the rules of
// tasks.ReadFile: a regular file (not a symbolic link, not a submodule) of
// at most tasks.MaxFileBytes. A missing file is errNoRev.
func readCommitted(ctx context.Context, repo, rev, path string) ([]byte, error) {
	out, err := gitRead(ctx, repo, 4096, "ls-tree", "--long", "-z", rev, "--", path)
	if err != nil {
		return nil, err
	}
	entry, _, _ := bytes.Cut(out, []byte{0})
	if len(entry) == 0 {
		return nil, errNoRev
	}
	meta, _, _ := bytes.Cut(entry, []byte{'\t'})
	f := strings.Fields(string(meta)) // mode type object size
	if len(f) != 4 {
		return nil, fmt.Errorf("unexpected git ls-tree answer %q", cutText(string(entry), 200))
	}
	if err := checkEntry(f[0], f[1], f[3]); err != nil {
		return nil, err
	}
	return gitRead(ctx, repo, tasks.MaxFileBytes, "cat-file", "blob", f[2])
}

// checkEntry applies the rules of tasks.ReadFile to a committed entry
// given as git ls-tree --long prints it: its mode, type and size ("-" for
// what is not a blob).
func checkEntry(mode, typ, size string) error {
	switch {
	case mode == "120000":
		return fmt.Errorf("it is committed as a symbolic link; commit the task file itself")
	case typ != "blob" || (mode != "100644" && mode != "100755"):
		return fmt.Errorf("it is committed as a %s (mode %s), not a file", typ, mode)
	}
	if n, err := strconv.ParseInt(size, 10, 64); err != nil || n > tasks.MaxFileBytes {
		return fmt.Errorf("the committed file is %s bytes, over %d; split the plan into several task files", size, tasks.MaxFileBytes)
	}
	return nil
}

// samePlan reports whether a and b differ at most in story statuses and
// notes.
func samePlan(a, b *tasks.File) bool {
	strip := func(f *tasks.File) []byte {
		c := *f
		c.UserStories = append([]tasks.Story(nil), f.UserStories...)
		for i := range c.UserStories {
			c.UserStories[i].Status, c.UserStories[i].Notes = tasks.Pending, ""
		}
		data, _ := c.Marshal()
		return data
	}
	return bytes.Equal(strip(a), strip(b))
}

// loadAsRun reads the task file p of repo as the container will run it (see
// the comment at the top of this file): the working-tree copy must be valid
// and equal to the committed copy the container reads (or, on an existing
// branch, differ only in progress). It returns the committed copy.
func loadAsRun(ctx context.Context, repo, p string, local bool) (*tasks.File, error) {
	wtData, wt, err := readWorkingCopy(repo, p)
	if err != nil {
		return nil, err
	}
	src, err := containerSource(ctx, repo, wt.Metadata.BranchName, local)
	if err != nil {
		return nil, err
	}
	data, err := readCommitted(ctx, repo, src.rev, p)
	return judgeCommitted(p, wtData, wt, src, data, err)
}

// readWorkingCopy reads and parses the working-tree copy of the task file
// p of repo.
func readWorkingCopy(repo, p string) ([]byte, *tasks.File, error) {
	data, err := tasks.ReadFileIn(repo, p)
	if err != nil {
		return nil, nil, err
	}
	tf, err := tasks.Parse(data)
	if err != nil {
		return nil, nil, err
	}
	return data, tf, nil
}

// judgeCommitted compares the working-tree copy of p (wtData, parsed as
// wt) with what readCommitted answered for it on src (data, or readErr),
// and returns the copy the container runs or why the start is refused.
func judgeCommitted(p string, wtData []byte, wt *tasks.File, src source, data []byte, readErr error) (*tasks.File, error) {
	commitHint := "commit it (git add " + p + " && git commit)"
	if src.remote {
		commitHint = "commit and push it (git add " + p + " && git commit && git push)"
	}
	switch {
	case errors.Is(readErr, errNoRev):
		return nil, fmt.Errorf("%s is not committed on %s, and the container reads the task file from there, not from your working tree: %s, then start again", p, src.desc, commitHint)
	case readErr != nil:
		return nil, fmt.Errorf("read %s on %s: %w", p, src.desc, readErr)
	}
	if bytes.Equal(data, wtData) {
		return wt, nil
	}
	committed, err := tasks.Parse(data)
	if err == nil && src.branch && samePlan(committed, wt) {
		return committed, nil // the branch's copy carries the progress of an earlier run
	}
	if src.branch {
		return nil, fmt.Errorf("%s on %s (from an earlier run; the container continues from it) differs from your working-tree copy in more than story statuses and notes: commit your change on branch %s, or give the task file a new branchName", p, src.desc, wt.Metadata.BranchName)
	}
	return nil, fmt.Errorf("your working-tree copy of %s differs from the one committed on %s, which is what the container runs: %s, or discard your changes (git checkout -- %s)", p, src.desc, commitHint, p)
}

// loadRecovered reads a task file of an adopted swarm as its container
// reads it (see loadAsRun), so that the fold restarts from the statuses the
// swarm started with; it falls back to the working-tree copy when git has
// none, since recovery must go on without it.
func loadRecovered(ctx context.Context, repo, p, branch string, local bool) (*tasks.File, error) {
	if src, err := containerSource(ctx, repo, branch, local); err == nil {
		if data, err := readCommitted(ctx, repo, src.rev, p); err == nil {
			if tf, err := tasks.Parse(data); err == nil {
				return tf, nil
			}
		}
	}
	return tasks.LoadIn(repo, p)
}
