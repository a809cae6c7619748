package orchestrator

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/aimi-tools/swarm/api"
)

// maxKnownTops bounds the tops a repoTops remembers: requests may name any
// number of directories, a daemon serves a handful of repositories.
const maxKnownTops = 256

// repoTops is ResolveRepo with a memory of the directories that git named
// their own top level. Asking git is a process started per request (5 ms on
// an idle machine, tens of ms on a loaded one), which status, asked often,
// must not pay. A remembered answer is used only while what git decided it
// from is unchanged: the directory's .git directory and its config file (an
// entry added, removed or renamed in .git, or a config edit such as
// core.worktree, changes one of their stamps). Only the answer "the
// directory itself" is remembered: it is also what ResolveRepo answers
// when git fails, so a change git would decide differently on (say, which
// directories it trusts) can only move the answer away from it, through
// the .git stamps.
type repoTops struct {
	mu    sync.Mutex
	known map[string]topMark // by the directory, symlinks resolved
}

// topMark is what a remembered answer was decided from.
type topMark struct{ git, config fileStamp }

// markOf stamps dir/.git and dir/.git/config; false when .git is not a
// directory with a config file (a linked work tree's .git file points
// elsewhere: not remembered).
func markOf(dir string) (topMark, bool) {
	git, ok := stampOf(filepath.Join(dir, ".git"))
	if !ok || !git.dir {
		return topMark{}, false
	}
	config, ok := stampOf(filepath.Join(dir, ".git", "config"))
	if !ok {
		return topMark{}, false
	}
	return topMark{git: git, config: config}, true
}

// resolve is ResolveRepo, asking git only when the answer is not known.
func (t *repoTops) resolve(ctx context.Context, p string) (string, error) {
	real, err := resolveDir(p)
	if err != nil {
		return "", err
	}
	mark, markable := markOf(real)
	if markable && t.knows(real, mark) {
		return real, nil
	}
	top, err := checkTop(p, gitTop(ctx, real))
	if err != nil {
		return "", err
	}
	// Stamped before git ran: a change while it ran fails the next check.
	if markable && top == real {
		t.remember(real, mark)
	}
	return top, nil
}

func (t *repoTops) knows(dir string, mark topMark) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.known[dir]
	return ok && m == mark
}

func (t *repoTops) remember(dir string, mark topMark) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known == nil || len(t.known) >= maxKnownTops {
		t.known = map[string]topMark{}
	}
	t.known[dir] = mark
}

// checkTop applies the request's rule to the resolved name too (a symlink
// may lead to a path the request could not have named).
func checkTop(p, top string) (string, error) {
	if err := api.CheckRepoPath(top); err != nil {
		return "", fmt.Errorf("%w: repoPath %q leads to a repository it cannot serve: %v", api.ErrInvalidRequest, p, err)
	}
	return top, nil
}
