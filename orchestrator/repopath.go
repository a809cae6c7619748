package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// gitTopTimeout bounds the git call that finds a repository's top level: a
// request must not hang on a wedged filesystem.
const gitTopTimeout = 10 * time.Second

// ResolveRepo is the one name of the repository at p that the daemon keys
// swarms, locks, state and container labels by: p with every symlink
// resolved, then the top level of the git work tree holding it (p itself
// when it is in none). Two requests naming one repository by different
// paths (a symlink, a subdirectory) so reach one swarm instead of two that
// overwrite each other's state file. p must be an absolute path of a
// directory.
func ResolveRepo(ctx context.Context, p string) (string, error) {
	real, err := resolveDir(p)
	if err != nil {
		return "", err
	}
	return checkTop(p, gitTop(ctx, real))
}

// resolveDir is the directory p names with every symlink resolved, once p
// is known to be a name a request may use.
func resolveDir(p string) (string, error) {
	// A request may name the repository by an unclean path; the rule is
	// about the name, not its spelling.
	clean := p
	if p != "" {
		clean = filepath.Clean(p)
	}
	if err := api.CheckRepoPath(clean); err != nil {
		return "", fmt.Errorf("%w: repoPath: %v", api.ErrInvalidRequest, err)
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return "", fmt.Errorf("%w: repoPath %q: %v", api.ErrInvalidRequest, p, err)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: repoPath %q is not a directory", api.ErrInvalidRequest, p)
	}
	return real, nil
}

// gitTop is the top level of the git work tree holding the directory real
// (symlinks resolved), or real itself when it is in none.
func gitTop(ctx context.Context, real string) string {
	ctx, cancel := context.WithTimeout(ctx, gitTopTimeout)
	defer cancel()
	out, err := gitcmd.Git{}.Command(ctx, real, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		// Not in a git work tree (or git refuses it): the directory is the
		// repository as far as the daemon can tell; starting a swarm there
		// fails later with git's own reason.
		return real
	}
	// git ends the path with one newline; only that one is not the path's.
	top := strings.TrimSuffix(string(out), "\n")
	if !filepath.IsAbs(top) {
		return real
	}
	if top, err = filepath.EvalSymlinks(top); err != nil {
		return real
	}
	return top
}

// cleanRepo is ResolveRepo for the Manager's entry points, with the
// Manager's memory of repositories' top levels.
func (m *Manager) cleanRepo(p string) (string, error) {
	return m.tops.resolve(context.Background(), p)
}
