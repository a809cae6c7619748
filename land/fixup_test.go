package land

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
)

// A fix-up branch holds the conflicted merge and its task file; once the
// agent's commit leaves no marker, its tree without the task file lands
// as the merge, and a marker left refuses it.
func TestFixupBranchAndFixedTree(t *testing.T) {
	r := newRepo(t)
	tr := r.train()
	ctx := context.Background()
	a := r.branch("a", map[string]string{"f": "one\nTWO-a\nthree\n"})
	b := r.branch("b", map[string]string{"f": "one\nTWO-b\nthree\n"})
	if _, err := tr.Land(ctx, a); err != nil {
		t.Fatal(err)
	}
	cur, _ := tr.Tip(ctx)
	var got Conflict
	tr.Fix = func(ctx context.Context, br Branch, base string, c Conflict) (string, error) {
		got = c
		return "", errors.New("later")
	}
	if res, err := tr.Land(ctx, b); err != nil || res.Outcome != Held {
		t.Fatalf("%+v %v", res, err)
	}
	tf := FixupTaskFile("aimi/land/abcd1234--fix-aimi-b", Side{Container: b.Container, TaskFile: b.TaskFile},
		[]Side{{Container: a.Container, TaskFile: a.TaskFile, File: &tasks.File{Metadata: tasks.Metadata{Title: "feat: a"},
			UserStories: []tasks.Story{{ID: "US-001", Title: "write f", AcceptanceCriteria: []string{"f says TWO-a"}}}}}}, got)
	if err := tf.Validate(); err != nil {
		t.Fatalf("the fix-up task file is invalid: %v", err)
	}
	notes := tf.UserStories[0].Notes
	if !strings.Contains(notes, "f says TWO-a") || tf.UserStories[0].AcceptanceCriteria[0] != contract.NoMarkerCriterion("f") {
		t.Errorf("fix-up story %+v", tf.UserStories[0])
	}
	long := Conflict{Tree: got.Tree, Files: []string{strings.Repeat("d/", 300) + "f"}}
	for _, bad := range []Conflict{long, {Files: make([]string, 50)}, {Why: strings.Repeat("fail ", 500)}} {
		if err := FixupTaskFile("aimi/land/x--fix-y", Side{Container: strings.Repeat("c", 300)}, nil, bad).Validate(); err != nil {
			t.Errorf("a fix-up of long names is invalid: %v", err)
		}
	}
	data, _ := tf.Marshal()
	const taskPath = ".aimi/tasks/land-fix-aimi-b-tasks.json"
	scratch := t.TempDir()
	if _, err := tr.PrepareFixup(ctx, "refs/heads/fix", cur, got, taskPath, data, scratch); err != nil {
		t.Fatal(err)
	}
	if body := r.git("show", "fix:f"); !strings.Contains(body, "<<<<<<<") {
		t.Fatalf("the fix-up branch's f has no markers: %q", body)
	}
	if _, err := tr.FixedTree(ctx, r.git("rev-parse", "fix"), got, taskPath, scratch); !errors.Is(err, ErrMarkersLeft) {
		t.Errorf("markers left: %v, want ErrMarkersLeft", err)
	}
	r.git("checkout", "-q", "fix")
	os.WriteFile(filepath.Join(r.dir, "f"), []byte("one\nTWO-a\nTWO-b\nthree\n"), 0o644)
	r.git("commit", "-qam", "resolved")
	r.git("checkout", "-q", "main")
	tree, err := tr.FixedTree(ctx, r.git("rev-parse", "fix"), got, taskPath, scratch)
	if err != nil {
		t.Fatal(err)
	}
	if files := r.git("ls-tree", "-r", "--name-only", tree); strings.Contains(files, "land-fix") || !strings.Contains(files, "f") {
		t.Errorf("fixed tree holds %q", files)
	}
}
