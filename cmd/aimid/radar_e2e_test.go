package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/demoagent"
)

// radarTaskFile is a task file whose first story writes file (so two
// task files naming the same file write it differently: the demo agent
// writes the story's id into it) and whose second story dawdles, so the
// container still works while the radar looks.
func radarTaskFile(name, file string, idBase int) []byte {
	story := func(n int, title, criterion string, deps []string) map[string]any {
		return map[string]any{"id": fmt.Sprintf("US-%03d", idBase+n), "title": title,
			"description": "As a developer, I want " + title + " so that the feature grows.", "acceptanceCriteria": []string{criterion},
			"priority": n, "status": "pending", "dependsOn": deps, "notes": ""}
	}
	b, _ := json.MarshalIndent(map[string]any{
		"schemaVersion": "3.0",
		"metadata":      map[string]any{"title": "feat: " + name, "type": "feat", "branchName": "feat/" + name, "createdAt": "2026-12-07", "planPath": nil},
		"userStories": []map[string]any{
			story(1, "the shared file", "File "+file+" exists", []string{}),
			story(2, "a slow step "+demoagent.MarkerSlow, "File "+name+"-slow.txt exists", []string{fmt.Sprintf("US-%03d", idBase+1)}),
		},
	}, "", "  ")
	return b
}

// TestRadarReportsConflictsWhileContainersWork: six task files, two pairs
// of which write one file each differently, run on the real daemon,
// engine and runner. While every container still works (their second
// story dawdles), status reports both pairs, and only them, as conflicts
// naming the file, in the view, in status --json, under the status table
// and as conflict-detected events; the other two branches conflict with
// nobody.
func TestRadarReportsConflictsWhileContainersWork(t *testing.T) {
	parallel(t)
	img := sandboxImage(t)
	repo := gitRepo(t, 1)
	dir := filepath.Join(repo, ".aimi", "tasks")
	for i, tf := range []struct{ name, file string }{{"left", "shared.txt"}, {"right", "shared.txt"}, {"red", "colour.txt"}, {"blue", "colour.txt"}, {"apart", "apart.txt"}, {"alone", "alone.txt"}} {
		if err := os.WriteFile(filepath.Join(dir, tf.name+"-tasks.json"), radarTaskFile(tf.name, tf.file, 100*(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commitAll(t, repo)
	tmp := shortDir(t)
	sock := filepath.Join(tmp, "aimid.sock")
	launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(tmp, "data"), Image: img, Local: true})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	events := collectEvents(ctx, t, sock, repo)
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--max", "6", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() { aimi(context.Background(), "swarm", "cleanup", "--repo", repo, "--socket", sock, "--force") })
	v := waitFor(t, sock, repo, 6*time.Minute, "the radar's conflicts of left and right, red and blue", func(v api.SwarmView) bool {
		return len(radarConflicts(v)) >= 2
	})
	checkRadarView(t, v)
	checkRadarStatusCLI(ctx, t, repo, sock)
	events.wait(t, func(es []api.Event) bool {
		return slices.ContainsFunc(es, func(e api.Event) bool {
			return e.Kind == api.EventConflictDetected && e.Conflict != nil && slices.Equal(e.Conflict.Files, []string{"shared.txt"})
		})
	})
}

// radarConflicts is the conflicts (not overlaps) of v.
func radarConflicts(v api.SwarmView) []api.Conflict {
	var out []api.Conflict
	for _, c := range v.Conflicts {
		if c.Kind == "conflict" {
			out = append(out, c)
		}
	}
	return out
}

// checkRadarView: the conflicts are left and right's on shared.txt and
// red and blue's on colour.txt, seen while all four still run, and the
// two others' branches are in no conflict.
func checkRadarView(t *testing.T, v api.SwarmView) {
	t.Helper()
	names := map[string]string{}
	running := map[string]bool{}
	for _, c := range v.Containers {
		names[strings.TrimSuffix(filepath.Base(c.TaskFile), "-tasks.json")] = c.Name
		running[c.Name] = c.Status == "running"
	}
	pair := func(a, b string) []string { p := []string{names[a], names[b]}; slices.Sort(p); return p }
	want := map[string][]string{"shared.txt": pair("left", "right"), "colour.txt": pair("red", "blue")}
	cs := radarConflicts(v)
	if len(cs) != 2 {
		t.Fatalf("conflicts %+v, want the two pairs only", v.Conflicts)
	}
	for _, c := range cs {
		if len(c.Files) != 1 || c.Onto != "" || !slices.Equal(c.Containers, want[c.Files[0]]) {
			t.Errorf("conflict %+v, want %v", c, want)
		}
		for _, n := range c.Containers {
			if !running[n] {
				t.Errorf("the conflict %+v came after %s ended", c, n)
			}
		}
	}
}

// checkRadarStatusCLI: the status table and status --json say the same.
func checkRadarStatusCLI(ctx context.Context, t *testing.T, repo, sock string) {
	t.Helper()
	code, out, errOut := aimi(ctx, "swarm", "status", "--repo", repo, "--socket", sock)
	if code != 0 || !strings.Contains(out, "Conflicts (") || !strings.Contains(out, "shared.txt") || !strings.Contains(out, "colour.txt") {
		t.Errorf("status: %d\n%s\n%s\nwant a conflict line naming shared.txt", code, out, errOut)
	}
	code, out, _ = aimi(ctx, "swarm", "status", "--repo", repo, "--socket", sock, "--json")
	var doc struct {
		Conflicts []api.Conflict `json:"conflicts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(radarConflicts(api.SwarmView{Conflicts: doc.Conflicts})) != 2 {
		t.Errorf("status --json: %d %v\n%s\nwant two conflicts", code, err, out)
	}
}
