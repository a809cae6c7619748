package land

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Runner runs git in dir with extra environment (internal/gitcmd.Git:
// stdout even when git exits non-zero, for merge-tree's conflicts).
type Runner interface {
	RunEnv(ctx context.Context, dir string, env []string, args ...string) (string, error)
}

// ExitCoder is an error carrying a process's exit code.
type ExitCoder interface{ ExitCode() int }

// Branch is one container's work to land.
type Branch struct {
	Container string
	TaskFile  string
	Title     string
	Stories   []string // the ids of its stories, for the merge's message
	Tip       string   // the branch's commit
}

// Outcome is how a branch's landing ended.
type Outcome string

const (
	Landed Outcome = "landed" // merged cleanly (and passed the check)
	Fixed  Outcome = "fixed"  // merged after Fix resolved a conflict or a failed check
	Held   Outcome = "held"   // left out: Reason says why
)

// Result is one branch's outcome.
type Result struct {
	Container string   `json:"container"`
	Outcome   Outcome  `json:"outcome"`
	Reason    string   `json:"reason,omitempty"`
	Tip       string   `json:"tip"`
	Merge     string   `json:"merge,omitempty"`  // the merge commit on the integration branch
	Files     []string `json:"files,omitempty"`  // a conflict's files
	Verify    string   `json:"verify,omitempty"` // "passed", "failed", "" (no check)
}

// Check verifies a merge commit's tree (the verify command in a sealed
// sandbox); ok false with why when it fails.
type Check func(ctx context.Context, commit string) (ok bool, why string, err error)

// Fixer resolves a branch that conflicts or fails the check: base is the
// integration branch's tip, the merge of b into it gave conflicted (a
// tree with conflict markers in files) or failed the check. It returns
// the tree to commit as the merge, or an error: the branch is held.
type Fixer func(ctx context.Context, b Branch, base string, conflicted Conflict) (tree string, err error)

// Conflict is what a merge left to resolve: the merged tree (markers
// written in the conflicted files) and those files; no files when the
// merge was clean and the check failed.
type Conflict struct {
	Tree  string
	Files []string
	Why   string
}

// Train lands branches onto Ref in the repository at Dir.
type Train struct {
	Git Runner
	Dir string
	// Ref is the integration branch (refs/heads/aimi/land/<swarm>); made at
	// Onto when it does not exist.
	Ref  string
	Onto string
	// Check and Fix are optional: no check, and a conflict is held.
	Check Check
	Fix   Fixer
	// Hook is called between the steps a crash may split (nil: none).
	Hook Hook
}

// identity is who makes the merge commits: the same inputs always make
// the same commit, so a merge made again after a crash is the same one.
var identity = []string{
	"GIT_AUTHOR_NAME=aimi land", "GIT_AUTHOR_EMAIL=land@aimi.invalid",
	"GIT_COMMITTER_NAME=aimi land", "GIT_COMMITTER_EMAIL=land@aimi.invalid",
}

// Land lands b onto the integration branch and returns its outcome. It
// is idempotent: a branch the integration branch holds already is Landed
// with the merge that brought it.
func (t *Train) Land(ctx context.Context, b Branch) (Result, error) {
	res := Result{Container: b.Container, Tip: b.Tip}
	cur, err := t.start(ctx)
	if err != nil {
		return res, err
	}
	if merge, parent, ok, err := t.holds(ctx, cur, b.Tip); err != nil || ok {
		if err != nil || merge == "" {
			res.Outcome = Landed
			return res, err
		}
		return t.landedBefore(ctx, res, merge, parent)
	}
	tree, files, err := t.mergeTree(ctx, cur, b.Tip)
	if err != nil {
		return res, err
	}
	outcome := Landed
	if len(files) == 0 {
		if ok, why, err := t.check(ctx, cur, b, tree); err != nil {
			return res, err
		} else if !ok {
			res.Verify = "failed"
			tree, outcome, err = t.fix(ctx, b, cur, Conflict{Tree: tree, Why: why}, &res)
			if err != nil || tree == "" {
				return res, err
			}
		}
	} else {
		res.Files = files
		tree, outcome, err = t.fix(ctx, b, cur, Conflict{Tree: tree, Files: files, Why: "conflict"}, &res)
		if err != nil || tree == "" {
			return res, err
		}
	}
	merge, err := t.commit(ctx, tree, cur, b)
	if err != nil {
		return res, err
	}
	t.Hook.At(ctx, PointMergeMade, b.Container)
	if _, err := t.Git.RunEnv(ctx, t.Dir, nil, "update-ref", "-m", "aimi land "+b.Container, t.Ref, merge, cur); err != nil {
		return res, fmt.Errorf("land %s: move %s from %s (did another land move it? run land again): %w", b.Container, t.Ref, short(cur), err)
	}
	t.Hook.At(ctx, PointMergeMoved, b.Container)
	res.Outcome, res.Merge = outcome, merge
	if res.Verify == "failed" || (t.Check != nil && outcome == Landed) {
		res.Verify = "passed"
	}
	return res, nil
}

// start is the integration branch's tip, made at Onto when new.
func (t *Train) start(ctx context.Context) (string, error) {
	cur, err := t.revParse(ctx, t.Ref)
	if err != nil || cur != "" {
		return cur, err
	}
	onto, err := t.revParse(ctx, t.Onto)
	if err != nil {
		return "", err
	}
	if onto == "" {
		return "", fmt.Errorf("land: the landing target %s is not a commit of %s", t.Onto, t.Dir)
	}
	// The zero old value: made only if nobody made it meanwhile.
	if _, err := t.Git.RunEnv(ctx, t.Dir, nil, "update-ref", "-m", "aimi land: start at "+t.Onto, t.Ref, onto, strings.Repeat("0", len(onto))); err != nil {
		if cur, err2 := t.revParse(ctx, t.Ref); err2 == nil && cur != "" {
			return cur, nil
		}
		return "", fmt.Errorf("land: start %s at %s: %w", t.Ref, t.Onto, err)
	}
	return onto, nil
}

// holds reports whether tip is in cur's history already, and the merge
// on cur's first-parent line that brought it with its first parent (""
// if it came otherwise).
func (t *Train) holds(ctx context.Context, cur, tip string) (merge, parent string, ok bool, err error) {
	_, err = t.Git.RunEnv(ctx, t.Dir, nil, "merge-base", "--is-ancestor", tip, cur)
	var ec ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() == 1 {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("land: is %s in %s: %w", short(tip), t.Ref, err)
	}
	out, err := t.Git.RunEnv(ctx, t.Dir, nil, "rev-list", "--first-parent", "--parents", "--max-count=10000", cur)
	if err != nil {
		return "", "", true, nil
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == tip {
			return f[0], f[1], true, nil
		}
	}
	return "", "", true, nil
}

// landedBefore is the outcome of a branch an earlier land merged (one a
// crash cut short before it recorded it), told by git alone: the merge of
// its two parents conflicts (fixed), is clean but not the merge's tree
// (fixed after a failed check: the fix-up's runner verified it), or is
// the merge's tree (landed, and checked when there is a check; a fix-up
// that changed nothing reads as this too).
func (t *Train) landedBefore(ctx context.Context, res Result, merge, parent string) (Result, error) {
	res.Outcome, res.Merge = Landed, merge
	tree, files, err := t.mergeTree(ctx, parent, res.Tip)
	if err != nil {
		return res, err
	}
	have, err := t.Git.RunEnv(ctx, t.Dir, nil, "rev-parse", merge+"^{tree}")
	if err != nil {
		return res, fmt.Errorf("land: read the tree of %s: %w", short(merge), err)
	}
	have = strings.TrimSpace(have)
	switch {
	case len(files) > 0:
		res.Outcome, res.Files = Fixed, files
	case tree != have:
		res.Outcome, res.Verify = Fixed, "passed"
	case t.Check != nil:
		res.Verify = "passed"
	}
	return res, nil
}

// mergeTree merges tip into cur in the object database: the tree, and
// the conflicted files (none: clean).
func (t *Train) mergeTree(ctx context.Context, cur, tip string) (string, []string, error) {
	out, err := t.Git.RunEnv(ctx, t.Dir, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", cur, tip)
	var ec ExitCoder
	clean := err == nil
	if err != nil && !(errors.As(err, &ec) && ec.ExitCode() == 1) {
		return "", nil, fmt.Errorf("land: merge %s into %s: %w", short(tip), short(cur), err)
	}
	fields := strings.Split(out, "\x00")
	tree := strings.TrimSpace(fields[0])
	if clean {
		return tree, nil, nil
	}
	var files []string
	for _, f := range fields[1:] {
		if f == "" {
			break
		}
		if len(files) == 0 || files[len(files)-1] != f {
			files = append(files, f)
		}
	}
	return tree, files, nil
}

func (t *Train) check(ctx context.Context, cur string, b Branch, tree string) (bool, string, error) {
	if t.Check == nil {
		return true, "", nil
	}
	// The check needs a commit: the merge as it would land.
	merge, err := t.commit(ctx, tree, cur, b)
	if err != nil {
		return false, "", err
	}
	return t.Check(ctx, merge)
}

// fix asks Fix for a tree, or holds the branch (tree "").
func (t *Train) fix(ctx context.Context, b Branch, cur string, c Conflict, res *Result) (string, Outcome, error) {
	hold := func(reason string) (string, Outcome, error) {
		res.Outcome, res.Reason = Held, reason
		return "", Held, nil
	}
	why := "it conflicts with what landed before it on " + strings.Join(c.Files, ", ")
	if len(c.Files) == 0 {
		why = "the verify command failed on the merge: " + c.Why
	}
	if t.Fix == nil {
		return hold(why)
	}
	tree, err := t.Fix(ctx, b, cur, c)
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return hold(why + "; the fix-up failed: " + err.Error())
	}
	return tree, Fixed, nil
}

// commit makes the merge commit of tree with parents cur and b's tip.
func (t *Train) commit(ctx context.Context, tree, cur string, b Branch) (string, error) {
	msg := fmt.Sprintf("Land %s: %s", b.TaskFile, b.Title)
	if len(b.Stories) > 0 {
		msg += "\n\nStories: " + strings.Join(b.Stories, ", ")
	}
	msg += "\nContainer: " + b.Container
	// The branch tip's date: the same inputs make the same commit, so a
	// merge made again after a crash (or checked, then landed) is one.
	date, err := t.Git.RunEnv(ctx, t.Dir, nil, "log", "-1", "--format=%cI", b.Tip)
	if err != nil {
		return "", fmt.Errorf("land %s: read the date of %s: %w", b.Container, short(b.Tip), err)
	}
	date = strings.TrimSpace(date)
	env := append(append([]string(nil), identity...), "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	out, err := t.Git.RunEnv(ctx, t.Dir, env, "commit-tree", tree, "-p", cur, "-p", b.Tip, "-m", msg)
	if err != nil {
		return "", fmt.Errorf("land %s: make the merge commit: %w", b.Container, err)
	}
	return strings.TrimSpace(out), nil
}

func (t *Train) revParse(ctx context.Context, ref string) (string, error) {
	out, err := t.Git.RunEnv(ctx, t.Dir, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	var ec ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() == 1 {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("land: read %s: %w", ref, err)
	}
	return strings.TrimSpace(out), nil
}

func short(oid string) string { return oid[:min(len(oid), 12)] }

// Tip is the integration branch's commit ("" before the first Land).
func (t *Train) Tip(ctx context.Context) (string, error) { return t.revParse(ctx, t.Ref) }
