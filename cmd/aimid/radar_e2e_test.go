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

// TestRadarReportsConflictsWhileContainersWork: three task files, two of
// which write the same file differently, run on the real daemon, engine
// and runner. While both containers of the pair still work (their second
// story dawdles), status reports that pair, and only it, as a conflict
// naming the file, in the view, in status --json, under the status table
// and as a conflict-detected event; the third container's branch conflicts
// with nobody.
func TestRadarReportsConflictsWhileContainersWork(t *testing.T) {
	parallel(t)
	img := sandboxImage(t)
	repo := gitRepo(t, 1)
	dir := filepath.Join(repo, ".aimi", "tasks")
	for i, tf := range []struct{ name, file string }{{"left", "shared.txt"}, {"right", "shared.txt"}, {"apart", "apart.txt"}} {
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
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() { aimi(context.Background(), "swarm", "cleanup", "--repo", repo, "--socket", sock, "--force") })
	v := waitFor(t, sock, repo, 6*time.Minute, "the radar's conflict of left and right", func(v api.SwarmView) bool {
		return len(radarConflicts(v)) > 0
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

// checkRadarView: the one conflict is left and right's on shared.txt, seen
// while both still run, and apart's branch is in no conflict.
func checkRadarView(t *testing.T, v api.SwarmView) {
	t.Helper()
	names := map[string]string{}
	running := map[string]bool{}
	for _, c := range v.Containers {
		names[strings.TrimSuffix(filepath.Base(c.TaskFile), "-tasks.json")] = c.Name
		running[c.Name] = c.Status == "running"
	}
	cs := radarConflicts(v)
	want := []string{names["left"], names["right"]}
	slices.Sort(want)
	if len(cs) != 1 || cs[0].Onto != "" || !slices.Equal(cs[0].Containers, want) || !slices.Equal(cs[0].Files, []string{"shared.txt"}) {
		t.Fatalf("conflicts %+v, want only %v on shared.txt", v.Conflicts, want)
	}
	if !running[want[0]] || !running[want[1]] {
		t.Errorf("the conflict came after a container of the pair ended: %+v", v.Containers)
	}
}

// checkRadarStatusCLI: the status table and status --json say the same.
func checkRadarStatusCLI(ctx context.Context, t *testing.T, repo, sock string) {
	t.Helper()
	code, out, errOut := aimi(ctx, "swarm", "status", "--repo", repo, "--socket", sock)
	if code != 0 || !strings.Contains(out, "Conflicts (") || !strings.Contains(out, "shared.txt") {
		t.Errorf("status: %d\n%s\n%s\nwant a conflict line naming shared.txt", code, out, errOut)
	}
	code, out, _ = aimi(ctx, "swarm", "status", "--repo", repo, "--socket", sock, "--json")
	var doc struct {
		Conflicts []api.Conflict `json:"conflicts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(radarConflicts(api.SwarmView{Conflicts: doc.Conflicts})) != 1 {
		t.Errorf("status --json: %d %v\n%s\nwant one conflict", code, err, out)
	}
}
