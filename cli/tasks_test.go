package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/fixtures"
)

func TestTasksValidate(t *testing.T) {
	fx := fixtures.Dir(t)
	valid := filepath.Join(fx, "tasks", "valid", "2026-11-20-diamond-tasks.json")
	missingDep := filepath.Join(fx, "tasks", "invalid", "missing-dependency.json")
	cycle := filepath.Join(fx, "tasks", "invalid", "cycle.json")
	noTypecheck := writeFile(t, "t.json", `{"schemaVersion":"3.0","metadata":{"title":"t","type":"bug","branchName":"b","createdAt":"2026-01-02"},
"userStories":[{"id":"US-001","title":"x","description":"y","acceptanceCriteria":["works"],"priority":1,"status":"pending","dependsOn":[]}]}`)
	badBranch := writeFile(t, "b.json", `{"schemaVersion":"3.0","metadata":{"title":"t","type":"bug","branchName":"a//b","createdAt":"2026-01-02"},
"userStories":[{"id":"US-001","title":"x","description":"y","acceptanceCriteria":["Typecheck passes"],"priority":1,"status":"pending","dependsOn":[]}]}`)
	cases := []struct {
		name     string
		args     []string
		want     int
		wantOut  []string
		wantErrs string
	}{
		{"valid file exits 0", []string{valid}, ExitOK, []string{"valid (4 stories)"}, ""},
		{"invalid file exits 1 with Error and Fix lines", []string{valid, missingDep}, ExitInvalid, []string{
			"missing-dependency.json: invalid (1 problem)\n" +
				"Error: Invalid tasks.json - US-003.dependsOn references \"US-099\" which does not exist.\n" +
				"Fix: Remove \"US-099\" from US-003.dependsOn or add a story with id \"US-099\".\n"}, ""},
		{"cycle is printed with its path", []string{cycle}, ExitInvalid, []string{"US-001 -> US-003 -> US-002 -> US-001"}, ""},
		{"missing Typecheck passes is a warning only", []string{noTypecheck}, ExitOK, []string{"valid (1 story)", "Warning: US-001.acceptanceCriteria"}, ""},
		{"unreadable file exits 2", []string{valid, filepath.Join(t.TempDir(), "none.json")}, ExitUsage, []string{"valid (4 stories)"}, "no such file"},
		{"unreadable file wins over invalid", []string{missingDep, filepath.Join(t.TempDir(), "none.json")}, ExitUsage, []string{"invalid"}, "no such file"},
		{"branch name git refuses is invalid, naming git's rule", []string{badBranch}, ExitInvalid, []string{`branch name "a//b" has an empty component`}, ""},
		{"no file is a usage error", nil, ExitUsage, nil, "requires at least 1 arg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, "", append([]string{"tasks", "validate"}, tc.args...)...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.want, out, errs)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errs, tc.wantErrs) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErrs, errs)
			}
		})
	}
}

func TestTasksValidateReadsStdin(t *testing.T) {
	code, out, _ := runCLI(t, "[]", "tasks", "validate", "-")
	if code != ExitInvalid || !strings.Contains(out, "-: invalid") || !strings.Contains(out, "Error: Invalid tasks.json - the file is not a JSON object") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
