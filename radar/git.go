package radar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Runner runs git in dir with extra environment (internal/gitcmd's Git
// with its Env, for one). A radar's runner should run git at a low
// priority: the radar is never in a hurry.
type Runner interface {
	RunEnv(ctx context.Context, dir string, env []string, args ...string) (string, error)
}

// ExitCoder is an error carrying a process's exit code (gitcmd.GitError).
type ExitCoder interface{ ExitCode() int }

// ErrOldGit: git merge-tree --write-tree needs git 2.38 or later.
var ErrOldGit = errors.New("the conflict radar needs git 2.38 or later (git merge-tree --write-tree); install a newer git or turn the radar off")

// merger runs the merges of one radar.
type merger struct {
	git     Runner
	dir     string
	scratch string

	once     sync.Once
	checkErr error
}

// outcome is what one merge gave: kind "" when there is nothing to say.
type outcome struct {
	kind  Kind
	files []string
}

var gitVersion = regexp.MustCompile(`git version (\d+)\.(\d+)`)

// check refuses a git too old for merge-tree --write-tree, once.
func (m *merger) check(ctx context.Context) error {
	m.once.Do(func() {
		out, err := m.git.RunEnv(ctx, m.dir, nil, "version")
		if err != nil {
			m.checkErr = fmt.Errorf("radar: ask git its version: %w", err)
			return
		}
		v := gitVersion.FindStringSubmatch(out)
		if v == nil {
			m.checkErr = fmt.Errorf("radar: git said %q for its version: %w", out, ErrOldGit)
			return
		}
		major, _ := strconv.Atoi(v[1])
		minor, _ := strconv.Atoi(v[2])
		if major < 2 || major == 2 && minor < 38 {
			m.checkErr = fmt.Errorf("radar: %s: %w", strings.TrimSpace(out), ErrOldGit)
		}
	})
	return m.checkErr
}

// env points git's new objects at the scratch directory and reads the
// repository's own through alternates.
func (m *merger) env() ([]string, error) {
	objs := filepath.Join(m.scratch, "objects")
	if err := os.MkdirAll(objs, 0o700); err != nil {
		return nil, fmt.Errorf("make the radar's scratch objects: %w", err)
	}
	own, err := m.git.RunEnv(context.Background(), m.dir, nil, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return nil, err
	}
	return []string{"GIT_OBJECT_DIRECTORY=" + objs, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + own}, nil
}

// clean drops the merges' trees.
func (m *merger) clean() { os.RemoveAll(m.scratch) }

// merge merges commits a and b in the object database. A conflict names
// the conflicted files; a clean merge names the files both sides changed
// since their merge base.
func (m *merger) merge(ctx context.Context, a, b string) (outcome, error) {
	env, err := m.env()
	if err != nil {
		return outcome{}, err
	}
	out, err := m.git.RunEnv(ctx, m.dir, env, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", a, b)
	var ec ExitCoder
	switch {
	case err == nil:
		return m.overlap(ctx, a, b)
	case errors.As(err, &ec) && ec.ExitCode() == 1:
		return outcome{kind: KindConflict, files: conflicted(out)}, nil
	default:
		return outcome{}, err
	}
}

// conflicted is the file names after the tree id in merge-tree's -z
// --name-only output.
func conflicted(out string) []string {
	fields := strings.Split(out, "\x00")
	var files []string
	for _, f := range fields[min(1, len(fields)):] {
		if f == "" {
			break // the end of the conflicted files' section
		}
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files
}

// overlap is the files both a and b changed since their merge base.
func (m *merger) overlap(ctx context.Context, a, b string) (outcome, error) {
	base, err := m.git.RunEnv(ctx, m.dir, nil, "merge-base", a, b)
	if err != nil {
		return outcome{}, nil // unrelated histories: nothing in common to overlap
	}
	base = strings.TrimSpace(base)
	fa, err := m.changed(ctx, base, a)
	if err != nil {
		return outcome{}, err
	}
	fb, err := m.changed(ctx, base, b)
	if err != nil {
		return outcome{}, err
	}
	var both []string
	for _, f := range fa {
		if _, ok := slices.BinarySearch(fb, f); ok {
			both = append(both, f)
		}
	}
	if len(both) == 0 {
		return outcome{}, nil
	}
	return outcome{kind: KindOverlap, files: both}, nil
}

// changed is the sorted files that differ between base and tip.
func (m *merger) changed(ctx context.Context, base, tip string) ([]string, error) {
	out, err := m.git.RunEnv(ctx, m.dir, nil, "diff", "--name-only", "--no-renames", "-z", base, tip)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(out, "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files, nil
}
