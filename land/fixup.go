package land

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
)

// FixupStoryID is the one story of a fix-up task file.
const FixupStoryID = "US-001"

// Side is one task file whose branch took part in a conflict.
type Side struct {
	Container string
	TaskFile  string
	File      *tasks.File // nil when the daemon no longer has it
}

// FixupTaskFile is the task file of the fix-up run of b's merge: one
// story whose description quotes both sides' plans (titles, stories and
// acceptance criteria) and whose criteria ask for every conflicted file
// resolved and both sides' criteria kept. branch is the fix-up's branch.
func FixupTaskFile(branch string, b Side, landed []Side, c Conflict) *tasks.File {
	var d strings.Builder
	if len(c.Files) > 0 {
		fmt.Fprintf(&d, "Merging the branch of %s into the integration branch conflicts on %s. Git's conflict markers are written into those files in your working directory. Resolve them so that both sides' work stays and both task files' acceptance criteria still hold (their plans are in the notes).",
			b.Container, oneLine(strings.Join(c.Files, ", "), 200))
	} else {
		fmt.Fprintf(&d, "Merging the branch of %s into the integration branch is in your working directory, and the verify command fails on it: %s. Fix it so that it passes and both task files' acceptance criteria still hold (their plans are in the notes).",
			b.Container, oneLine(c.Why, 200))
	}
	var notes strings.Builder
	for _, s := range append([]Side{b}, landed...) {
		quote(&notes, s)
	}
	var criteria []string
	for i, f := range c.Files {
		if cr := contract.NoMarkerCriterion(f); i < maxFixupFiles && len(cr) <= tasks.MaxCriterionChars {
			criteria = append(criteria, cr)
		} else {
			criteria = append(criteria, "No conflict marker is left in any other conflicted file")
			break
		}
	}
	criteria = append(criteria, "Every acceptance criterion of both task files quoted in the notes still holds")
	return &tasks.File{
		SchemaVersion: "3.0",
		Metadata: tasks.Metadata{Title: oneLine("fix: land "+b.Container, tasks.MaxTitleChars), Type: "bug", BranchName: branch,
			CreatedAt: time.Now().UTC().Format(time.DateOnly)},
		UserStories: []tasks.Story{{ID: FixupStoryID, Title: oneLine("Resolve the merge of "+b.Container, tasks.MaxTitleChars),
			Description: oneLine(d.String(), tasks.MaxDescriptionChars), AcceptanceCriteria: criteria, Priority: 1,
			Status: tasks.Pending, DependsOn: []string{}, Notes: notes.String()}},
	}
}

// maxFixupFiles bounds the files a fix-up's criteria name one by one.
const maxFixupFiles = 20

// quote writes one side's plan into a fix-up's description, bounded.
func quote(d *strings.Builder, s Side) {
	if s.File == nil {
		fmt.Fprintf(d, "Task file %s (of %s): no longer readable.\n\n", s.TaskFile, s.Container)
		return
	}
	fmt.Fprintf(d, "Task file %s (of %s): %q\n", s.TaskFile, s.Container, oneLine(s.File.Metadata.Title, 200))
	for i, st := range s.File.UserStories {
		if i == 20 {
			fmt.Fprintf(d, "- and %d more stories\n", len(s.File.UserStories)-i)
			break
		}
		fmt.Fprintf(d, "- %s %s: %s\n", st.ID, oneLine(st.Title, 200), oneLine(strings.Join(st.AcceptanceCriteria, "; "), 600))
	}
	d.WriteString("\n")
}

// PrepareFixup makes the fix-up's branch ref at a commit on top of base
// whose tree is the conflicted merge plus the fix-up task file at
// taskPath; scratch holds a temporary index.
func (t *Train) PrepareFixup(ctx context.Context, ref, base string, c Conflict, taskPath string, task []byte, scratch string) (string, error) {
	idx, done, err := tempIndex(scratch)
	if err != nil {
		return "", err
	}
	defer done()
	env := indexEnv(idx)
	if _, err := t.Git.RunEnv(ctx, t.Dir, env, "read-tree", c.Tree); err != nil {
		return "", fmt.Errorf("land: read the conflicted tree: %w", err)
	}
	blob, err := t.hashBlob(ctx, task, scratch)
	if err != nil {
		return "", err
	}
	if _, err := t.Git.RunEnv(ctx, t.Dir, env, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+taskPath); err != nil {
		return "", fmt.Errorf("land: add the fix-up task file: %w", err)
	}
	tree, err := t.Git.RunEnv(ctx, t.Dir, env, "write-tree")
	if err != nil {
		return "", fmt.Errorf("land: write the fix-up tree: %w", err)
	}
	commit, err := t.Git.RunEnv(ctx, t.Dir, identity, "commit-tree", strings.TrimSpace(tree), "-p", base, "-m", "Land fix-up: the merge to resolve")
	if err != nil {
		return "", fmt.Errorf("land: make the fix-up commit: %w", err)
	}
	commit = strings.TrimSpace(commit)
	if _, err := t.Git.RunEnv(ctx, t.Dir, nil, "update-ref", ref, commit); err != nil {
		return "", fmt.Errorf("land: make the fix-up branch %s: %w", ref, err)
	}
	return commit, nil
}

// ErrMarkersLeft: a fix-up ended with a conflict marker still in a file.
var ErrMarkersLeft = errors.New("a conflict marker is left")

// FixedTree is the tree of a fix-up's tip without its task file, once no
// conflicted file holds a marker.
func (t *Train) FixedTree(ctx context.Context, tip string, c Conflict, taskPath, scratch string) (string, error) {
	if len(c.Files) > 0 {
		args := append([]string{"grep", "-l", "-E", "-e", "^(<<<<<<<|>>>>>>>)( |$)", tip, "--"}, c.Files...)
		out, err := t.Git.RunEnv(ctx, t.Dir, nil, args...)
		var ec ExitCoder
		switch {
		case err == nil:
			return "", fmt.Errorf("land: %w in %s", ErrMarkersLeft, oneLine(strings.ReplaceAll(out, tip+":", ""), 400))
		case !errors.As(err, &ec) || ec.ExitCode() != 1:
			return "", fmt.Errorf("land: look for conflict markers: %w", err)
		}
	}
	idx, done, err := tempIndex(scratch)
	if err != nil {
		return "", err
	}
	defer done()
	env := indexEnv(idx)
	if _, err := t.Git.RunEnv(ctx, t.Dir, env, "read-tree", tip); err != nil {
		return "", fmt.Errorf("land: read the fix-up's tree: %w", err)
	}
	if _, err := t.Git.RunEnv(ctx, t.Dir, env, "update-index", "--force-remove", taskPath); err != nil {
		return "", fmt.Errorf("land: drop the fix-up task file: %w", err)
	}
	tree, err := t.Git.RunEnv(ctx, t.Dir, env, "write-tree")
	return strings.TrimSpace(tree), err
}

func (t *Train) hashBlob(ctx context.Context, data []byte, scratch string) (string, error) {
	f, err := os.CreateTemp(scratch, "blob")
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	out, err := t.Git.RunEnv(ctx, t.Dir, nil, "hash-object", "-w", "--", f.Name())
	if err != nil {
		return "", fmt.Errorf("land: store the fix-up task file: %w", err)
	}
	return strings.TrimSpace(out), nil
}

// tempIndex is a fresh index file's path under scratch, and its removal.
func tempIndex(scratch string) (string, func(), error) {
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return "", nil, fmt.Errorf("land: scratch: %w", err)
	}
	dir, err := os.MkdirTemp(scratch, "index")
	if err != nil {
		return "", nil, fmt.Errorf("land: scratch: %w", err)
	}
	return filepath.Join(dir, "index"), func() { os.RemoveAll(dir) }, nil
}

// indexEnv is the environment of git commands on a temporary index: a
// bare repository has no work tree, which some of them ask for (one that
// is never written, as nothing is checked out).
func indexEnv(idx string) []string {
	return []string{"GIT_INDEX_FILE=" + idx, "GIT_WORK_TREE=" + filepath.Dir(idx)}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// fixupTaskPrefix and verifyTaskPrefix start the paths of the task files
// of a land's own runs.
const (
	fixupTaskPrefix  = ".aimi/tasks/land-fix-"
	verifyTaskPrefix = ".aimi/tasks/land-verify-"
)

// FixupTaskPath is where the fix-up of container's merge keeps its task
// file (in its own branch only, never in the user's checkout).
func FixupTaskPath(container string) string { return fixupTaskPrefix + container + "-tasks.json" }

// VerifyTaskPath is where the check of container's merge keeps its task
// file (in its own branch only).
func VerifyTaskPath(container string) string { return verifyTaskPrefix + container + "-tasks.json" }

// IsLandRun reports whether a task file is one of a land's own runs (a
// fix-up or a check), not the user's work to land or to foresee
// conflicts of.
func IsLandRun(taskPath string) bool {
	return strings.HasPrefix(taskPath, fixupTaskPrefix) || strings.HasPrefix(taskPath, verifyTaskPrefix)
}

// VerifyTaskFile is the task file of the check of container's merge: one
// story the runner does not give an agent (contract.VerifyOnlyNotes): it
// runs the verify command on the merged tree.
func VerifyTaskFile(branch, container string) *tasks.File {
	return &tasks.File{
		SchemaVersion: "3.0",
		Metadata: tasks.Metadata{Title: oneLine("chore: check the land of "+container, tasks.MaxTitleChars), Type: "chore", BranchName: branch,
			CreatedAt: time.Now().UTC().Format(time.DateOnly)},
		UserStories: []tasks.Story{{ID: FixupStoryID, Title: oneLine("Verify the merge of "+container, tasks.MaxTitleChars),
			Description:        "The verify command passes on the integration branch with this merge.",
			AcceptanceCriteria: []string{"The verify command passes"}, Priority: 1, Status: tasks.Pending, DependsOn: []string{},
			Notes: contract.VerifyOnlyNotes}},
	}
}
