package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/tasks"
)

// TestDemoTaskFilesAreValidAndShaped runs demo.sh's make_repo (the script
// is sourced, not run) and checks the five task files against the tasks
// package: valid, with the linear, diamond, independent-roots and one-story
// shapes (the last two write one file two ways, for the land),
// ids and branches of their own, and committed.
func TestDemoTaskFilesAreValidAndShaped(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", `set -euo pipefail; source ../demo.sh; DEMO="$1"; REPO="$1/repo"; make_repo`, "demo", dir)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_repo: %v\n%s", err, out)
	}
	repo := filepath.Join(dir, "repo")
	files, _ := filepath.Glob(filepath.Join(repo, ".aimi", "tasks", "*-tasks.json"))
	if len(files) != 5 {
		t.Fatalf("task files: %v, want 5", files)
	}
	want := map[string]struct {
		branch string
		deps   map[string][]string
	}{
		"linear":      {"demo/linear", map[string][]string{"US-101": nil, "US-102": {"US-101"}, "US-103": {"US-102"}}},
		"diamond":     {"demo/diamond", map[string][]string{"US-201": nil, "US-202": {"US-201"}, "US-203": {"US-201"}, "US-204": {"US-202", "US-203"}}},
		"roots":       {"demo/roots", map[string][]string{"US-301": nil, "US-302": nil, "US-303": {"US-301", "US-302"}}},
		"greeting-en": {"demo/greeting-en", map[string][]string{"US-401": nil}},
		"greeting-fr": {"demo/greeting-fr", map[string][]string{"US-501": nil}},
	}
	for _, path := range files {
		f, err := tasks.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		shape := ""
		for k := range want {
			if strings.Contains(filepath.Base(path), "-demo-"+k+"-") {
				shape = k
			}
		}
		w, ok := want[shape]
		if !ok {
			t.Fatalf("unexpected task file %s", path)
		}
		if f.Metadata.BranchName != w.branch {
			t.Errorf("%s: branch %q, want %q", shape, f.Metadata.BranchName, w.branch)
		}
		if len(f.UserStories) != len(w.deps) {
			t.Errorf("%s: %d stories, want %d", shape, len(f.UserStories), len(w.deps))
		}
		for _, s := range f.UserStories {
			wd, ok := w.deps[s.ID]
			if !ok {
				t.Errorf("%s: unexpected story %s", shape, s.ID)
				continue
			}
			if strings.Join(s.DependsOn, ",") != strings.Join(wd, ",") {
				t.Errorf("%s %s: dependsOn %v, want %v", shape, s.ID, s.DependsOn, wd)
			}
		}
	}
	out, err := exec.Command("git", "-C", repo, "status", "--porcelain").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("demo repo not clean after make_repo: %v %s", err, out)
	}
}

func TestCheckstateVerdicts(t *testing.T) {
	const good = `{"swarmId":"0b6a2a5e-3c1d-4f2e-9a7b-1c2d3e4f5a6b","createdAt":"2026-11-22T16:00:00Z","updatedAt":"2026-11-22T16:01:00Z","containers":[` +
		`{"containerId":"0123456789ab","containerName":"aimi-demo-diamond","taskFilePath":".aimi/tasks/x-tasks.json","branchName":"demo/diamond","status":"%s","prUrl":null,` +
		`"storyProgress":{"total":4,"completed":4,"failed":0,"inProgress":0,"pending":0},"createdAt":"2026-11-22T16:00:00Z","updatedAt":"2026-11-22T16:01:00Z","acpPid":null}]}`
	tests := []struct {
		name    string
		state   string
		args    []string
		wantErr string
	}{
		{"completed swarm passes", strings.Replace(good, "%s", "completed", 1), nil, ""},
		{"a failed container fails the check", strings.Replace(good, "%s", "failed", 1), nil, "not every container completed"},
		{"wrong container count fails the check", strings.Replace(good, "%s", "completed", 1), []string{"-want", "3"}, "want 3"},
		{"unparsable file fails the check", "{", nil, "does not parse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repo := t.TempDir()
			if err := os.MkdirAll(filepath.Join(repo, ".aimi"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repo, ".aimi", "swarm-state.json"), []byte(tc.state), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := run(append([]string{"-repo", repo}, tc.args...), &out)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestAttemptsSectionPasses: a state file with an attempts section is
// valid; the picked attempt completed and a losing one stopped (its work
// kept) pass, and the pick's line is printed; without a pick it fails.
func TestAttemptsSectionPasses(t *testing.T) {
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, ".aimi"), 0o755); err != nil {
		t.Fatal(err)
	}
	entry := func(name, status string) string {
		return `{"containerId": "0123456789ab", "containerName": "` + name + `", "taskFilePath": ".aimi/tasks/x-tasks.json", "branchName": "feat/x--a1",
			"status": "` + status + `", "prUrl": null, "storyProgress": {"total": 1, "completed": 1, "failed": 0, "inProgress": 0, "pending": 0},
			"createdAt": "2026-12-07T08:00:00Z", "updatedAt": "2026-12-07T08:00:00Z", "acpPid": null}`
	}
	pick := `, "pick": {"attempt": 2, "containerName": "aimi-x-a2", "reason": "verified; the only one of 2", "by": "daemon", "at": "2026-12-07T08:00:00Z"}`
	write := func(pick string) {
		body := `{"swarmId": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b", "createdAt": "2026-12-07T08:00:00Z", "updatedAt": "2026-12-07T08:00:00Z",
			"containers": [` + entry("aimi-x-a1", "stopped") + `, ` + entry("aimi-x-a2", "completed") + `],
			"attempts": [{"taskFilePath": ".aimi/tasks/x-tasks.json", "branchName": "feat/x", "stop": "first-verified",
				"attempts": [{"attempt": 1, "containerName": "aimi-x-a1", "branchName": "feat/x--a1", "stoppedEarly": true},
					{"attempt": 2, "containerName": "aimi-x-a2", "branchName": "feat/x--a2", "qualified": true}]` + pick + `}]}`
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "swarm-state.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(pick)
	var out bytes.Buffer
	if err := run([]string{"-repo", repo, "-want", "2"}, &out); err != nil || !strings.Contains(out.String(), "feat/x: attempt 2 of 2 picked (verified; the only one of 2)") {
		t.Fatalf("run = %v\n%s", err, out.String())
	}
	write("")
	if err := run([]string{"-repo", repo}, &out); err == nil || !strings.Contains(err.Error(), "aimi-x-a1 is stopped") {
		t.Fatalf("without a pick: %v", err)
	}
}
