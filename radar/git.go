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
	"time"
)

// Runner runs git in dir with extra environment (internal/gitcmd's Git
// with its Env, for one). A radar's runner should run git at a low
// priority: the radar is never in a hurry.
type Runner interface {
	RunEnv(ctx context.Context, dir string, env []string, args ...string) (string, error)
}

// CPURunner is a Runner that also says how much CPU each git took
// (internal/gitcmd's Git): a radar then weighs its pauses by the CPU its
// looks took rather than by their wall time, which a loaded machine (the
// radar's git runs at a low priority) stretches.
type CPURunner interface {
	RunEnvCPU(ctx context.Context, dir string, env []string, args ...string) (string, time.Duration, error)
}

// ExitCoder is an error carrying a process's exit code (gitcmd.GitError).
type ExitCoder interface{ ExitCode() int }

// ErrOldGit: git merge-tree --write-tree needs git 2.38 or later.
var ErrOldGit = errors.New("the conflict radar needs git 2.38 or later (git merge-tree --write-tree); install a newer git or turn the radar off")

// merger runs the merges of one radar. Its caches are keyed by commits
// (which never change) and dropped when they grow past maxCached.
type merger struct {
	git     Runner
	dir     string
	scratch string
	target  string // the landing target's commit of this look ("": none)

	cpu time.Duration // the CPU of this look's git processes, when the runner says

	bases map[string]string   // "a\x00b" (sorted) -> their merge base ("" when unrelated)
	files map[string][]string // "base\x00tip" -> sorted files changed

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
		out, err := m.run(ctx, nil, "version")
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
	own, err := m.run(context.Background(), nil, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return nil, err
	}
	return []string{"GIT_OBJECT_DIRECTORY=" + objs, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + own}, nil
}

// run runs git in the repository, counting its CPU when the runner can.
func (m *merger) run(ctx context.Context, env []string, args ...string) (string, error) {
	if cr, ok := m.git.(CPURunner); ok {
		out, cpu, err := cr.RunEnvCPU(ctx, m.dir, env, args...)
		m.cpu += cpu
		return out, err
	}
	return m.git.RunEnv(ctx, m.dir, env, args...)
}

// clean drops the merges' trees.
func (m *merger) clean() { os.RemoveAll(m.scratch) }

// maxCached bounds each of a merger's caches (a swarm's branches keep
// pushing; old commits are never asked again).
const maxCached = 4096

// merge says what merging commits a and b would give. Only a pair whose
// sides changed a path in common since their merge base (touching) is
// merged (in the object database): sides that changed unrelated paths
// merge cleanly, so most pairs cost no git process once each tip's changes are
// known. A conflict names the conflicted files; a clean merge of sides
// that changed the same files is an overlap naming them.
func (m *merger) merge(ctx context.Context, a, b string) (outcome, error) {
	base, err := m.base(ctx, a, b)
	if err != nil || base == "" {
		return outcome{}, err
	}
	fa, err := m.changed(ctx, base, a)
	if err != nil {
		return outcome{}, err
	}
	fb, err := m.changed(ctx, base, b)
	if err != nil {
		return outcome{}, err
	}
	both := touching(fa, fb)
	if len(both) == 0 {
		return outcome{}, nil
	}
	env, err := m.env()
	if err != nil {
		return outcome{}, err
	}
	out, err := m.run(ctx, env, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", a, b)
	var ec ExitCoder
	switch {
	case err == nil:
		return outcome{kind: KindOverlap, files: both}, nil
	case errors.As(err, &ec) && ec.ExitCode() == 1:
		return outcome{kind: KindConflict, files: conflicted(out)}, nil
	default:
		return outcome{}, err
	}
}

// touching is the paths of sorted fa and fb that one side's merge with
// the other may clash on: those both changed, and a path one side changed
// where the other changed something under it as a directory (a file
// against a directory of the same name shares no path, yet conflicts).
func touching(fa, fb []string) []string {
	var out []string
	under := func(dir string, in []string) bool {
		i, _ := slices.BinarySearch(in, dir+"/")
		return i < len(in) && strings.HasPrefix(in[i], dir+"/")
	}
	for _, f := range fa {
		if _, ok := slices.BinarySearch(fb, f); ok || under(f, fb) {
			out = append(out, f)
		}
	}
	for _, f := range fb {
		if _, ok := slices.BinarySearch(fa, f); !ok && under(f, fa) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// base is a and b's merge base: the one both share with the landing
// target when they forked from the same commit of it (the usual swarm:
// one git process per tip, not per pair), else their own.
func (m *merger) base(ctx context.Context, a, b string) (string, error) {
	if m.target != "" && a != m.target && b != m.target {
		fa, err := m.pairBase(ctx, a, m.target)
		if err != nil {
			return "", err
		}
		if fb, err := m.pairBase(ctx, b, m.target); err != nil || (fa == fb && fa != "") {
			return fa, err
		}
	}
	return m.pairBase(ctx, a, b)
}

// pairBase is the merge base of a and b, "" when they share no history.
func (m *merger) pairBase(ctx context.Context, a, b string) (string, error) {
	key := min(a, b) + "\x00" + max(a, b)
	if base, ok := m.bases[key]; ok {
		return base, nil
	}
	out, err := m.run(ctx, nil, "merge-base", a, b)
	var ec ExitCoder
	switch {
	case errors.As(err, &ec) && ec.ExitCode() == 1:
		out, err = "", nil // unrelated histories
	case err != nil:
		return "", err
	}
	if m.bases == nil || len(m.bases) >= maxCached {
		m.bases = map[string]string{}
	}
	m.bases[key] = strings.TrimSpace(out)
	return m.bases[key], nil
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

// changed is the sorted files that differ between base and tip.
func (m *merger) changed(ctx context.Context, base, tip string) ([]string, error) {
	key := base + "\x00" + tip
	if files, ok := m.files[key]; ok {
		return files, nil
	}
	out, err := m.run(ctx, nil, "diff", "--name-only", "--no-renames", "-z", base, tip)
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
	if m.files == nil || len(m.files) >= maxCached {
		m.files = map[string][]string{}
	}
	m.files[key] = files
	return files, nil
}
