package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
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
	if p == "" {
		return "", fmt.Errorf("%w: repoPath is empty", api.ErrInvalidRequest)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: repoPath %q is not absolute", api.ErrInvalidRequest, p)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		return "", fmt.Errorf("%w: repoPath %q: %v", api.ErrInvalidRequest, p, err)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: repoPath %q is not a directory", api.ErrInvalidRequest, p)
	}
	ctx, cancel := context.WithTimeout(ctx, gitTopTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "-C", real, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		// Not in a git work tree (or git refuses it): the directory is the
		// repository as far as the daemon can tell; starting a swarm there
		// fails later with git's own reason.
		return real, nil
	}
	top := strings.TrimRight(string(out), "\n")
	if !filepath.IsAbs(top) {
		return real, nil
	}
	if top, err = filepath.EvalSymlinks(top); err != nil {
		return real, nil
	}
	return top, nil
}

// cleanRepo is ResolveRepo for the Manager's entry points.
func cleanRepo(p string) (string, error) {
	return ResolveRepo(context.Background(), p)
}
