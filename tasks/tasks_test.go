package tasks

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/fixtures"
)

func TestFixtures(t *testing.T) {
	fx := fixtures.Dir(t)
	// What each invalid fixture must be reported for: field and a fragment
	// of the message.
	wantInvalid := map[string][2]string{
		"bad-branch.json":           {"metadata.branchName", "-bad branch"},
		"bad-status.json":           {"status", `US-001.status is "done"`},
		"bad-story-id.json":         {"id", `"STORY-1"`},
		"bad-type.json":             {"metadata.type", `"feature"`},
		"cycle.json":                {"dependsOn", "US-001 -> US-003 -> US-002 -> US-001"},
		"duplicate-id.json":         {"id", "US-001 is the id of more than one story"},
		"duplicate-priority.json":   {"priority", "US-002.priority 1"},
		"missing-dependency.json":   {"dependsOn", `US-003.dependsOn references "US-099" which does not exist`},
		"no-stories.json":           {"userStories", "empty"},
		"not-json.json":             {"", "not valid JSON"},
		"self-dependency.json":      {"dependsOn", "US-001.dependsOn references US-001 itself"},
		"wrong-schema-version.json": {"schemaVersion", `"2.2"`},
	}
	invalid, _ := filepath.Glob(filepath.Join(fx, "tasks", "invalid", "*.json"))
	if len(invalid) == 0 {
		t.Fatal("no invalid fixtures")
	}
	for _, path := range invalid {
		name := filepath.Base(path)
		t.Run("invalid/"+name, func(t *testing.T) {
			want, ok := wantInvalid[name]
			if !ok {
				t.Fatalf("new fixture %s: add its expected problem to this test", name)
			}
			f, err := Load(path)
			var ps Problems
			if f != nil || !errors.As(err, &ps) {
				t.Fatalf("Load = %v, %v; want Problems", f, err)
			}
			for _, p := range ps {
				if p.Field == want[0] && strings.Contains(p.Error, want[1]) {
					if !strings.HasPrefix(p.String(), "Error: Invalid tasks.json - ") || !strings.Contains(p.String(), "\nFix: ") || p.Fix == "" {
						t.Errorf("not in Error/Fix form: %q", p.String())
					}
					return
				}
			}
			t.Fatalf("want %q in %s, got:\n%v", want[1], want[0], ps)
		})
	}
	valid, _ := filepath.Glob(filepath.Join(fx, "tasks", "valid", "*.json"))
	if len(valid) == 0 {
		t.Fatal("no valid fixtures")
	}
	for _, path := range valid {
		t.Run("valid/"+filepath.Base(path), func(t *testing.T) {
			f, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.UserStories) == 0 || f.Warnings() != nil {
				t.Fatalf("stories %d, warnings %v", len(f.UserStories), f.Warnings())
			}
			data, _ := os.ReadFile(path)
			out, err := f.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != string(data) && string(out) != string(data)+"\n" {
				t.Errorf("write-back differs from the planner's file:\n%s\nwant:\n%s", out, data)
			}
		})
	}
}

func TestLoadReportsReadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.json"))
	var ps Problems
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &ps) {
		t.Fatalf("want a wrapped not-exist error, got %v", err)
	}
}

// validDoc returns a valid task file as a generic map for mutation.
func validDoc() map[string]any {
	story := func(id string, prio int, deps ...string) map[string]any {
		if deps == nil {
			deps = []string{}
		}
		return map[string]any{"id": id, "title": "Story " + id, "description": "As a dev ...",
			"acceptanceCriteria": []any{"Works", "Typecheck passes"}, "priority": prio, "status": "pending",
			"dependsOn": deps, "notes": ""}
	}
	return map[string]any{
		"schemaVersion": "3.0",
		"metadata": map[string]any{"title": "feat: x", "type": "feat", "branchName": "feat/x",
			"createdAt": "2026-02-27", "planPath": nil},
		"userStories": []any{story("US-001", 1), story("US-002", 2, "US-001"), story("US-003", 3, "US-001", "US-002")},
	}
}

// taskRuleCase is one case of TestRules: the valid document changed by mut
// (or raw instead of it), and the field and text of the problem it has.
type taskRuleCase struct {
	name      string
	mut       func(d map[string]any)
	raw       string // used instead of the document when set
	wantField string // empty: valid
	wantText  string
}

func TestRules(t *testing.T) {
	cases := append(fileRuleCases(), storyRuleCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkTaskRule(t, tc) })
	}
}

// fileRuleCases are TestRules' cases of the document and its metadata
// (rules 1 to 7).
func fileRuleCases() []taskRuleCase {
	md := func(d map[string]any) map[string]any { return d["metadata"].(map[string]any) }
	return []taskRuleCase{
		{"valid file is accepted", nil, "", "", ""},
		// 1
		{"JSON array is not a task file", nil, `[]`, "", "not a JSON object"},
		{"null is not a task file", nil, `null`, "", "not a JSON object"},
		{"missing schemaVersion is rejected", func(d map[string]any) { delete(d, "schemaVersion") }, "", "schemaVersion", "missing"},
		{"schemaVersion 3 as a number is rejected", func(d map[string]any) { d["schemaVersion"] = 3 }, "", "schemaVersion", "expected"},
		// 2
		{"empty title is rejected", func(d map[string]any) { md(d)["title"] = " " }, "", "metadata.title", "empty"},
		{"missing title is rejected", func(d map[string]any) { delete(md(d), "title") }, "", "metadata.title", "missing"},
		{"missing metadata is rejected", func(d map[string]any) { delete(d, "metadata") }, "", "metadata", "missing"},
		// 3
		{"each metadata type is accepted", func(d map[string]any) { md(d)["type"] = "chore" }, "", "", ""},
		{"unknown metadata type is rejected", func(d map[string]any) { md(d)["type"] = "docs" }, "", "metadata.type", "docs"},
		// 4
		{"missing branchName is rejected", func(d map[string]any) { delete(md(d), "branchName") }, "", "metadata.branchName", "missing"},
		{"branchName with dot is rejected", func(d map[string]any) { md(d)["branchName"] = "v1.2" }, "", "metadata.branchName", "contains '.'"},
		{"branchName with // is rejected naming git's rule", func(d map[string]any) { md(d)["branchName"] = "a//b" }, "", "metadata.branchName", "empty component"},
		{"branchName with a trailing / is rejected", func(d map[string]any) { md(d)["branchName"] = "a/" }, "", "metadata.branchName", "empty component"},
		{"branchName HEAD is rejected", func(d map[string]any) { md(d)["branchName"] = "HEAD" }, "", "metadata.branchName", `"HEAD"`},
		{"branchName ending in .lock is rejected", func(d map[string]any) { md(d)["branchName"] = "a/b.lock" }, "", "metadata.branchName", `".lock"`},
		{"branchName of 300 characters is rejected", func(d map[string]any) { md(d)["branchName"] = strings.Repeat("b", 300) }, "", "metadata.branchName", "300 bytes long; the limit is 250"},
		// 5
		{"createdAt as a timestamp is rejected", func(d map[string]any) { md(d)["createdAt"] = "2026-02-27T10:00:00Z" }, "", "metadata.createdAt", "YYYY-MM-DD"},
		{"createdAt on an impossible date is rejected", func(d map[string]any) { md(d)["createdAt"] = "2026-02-30" }, "", "metadata.createdAt", "YYYY-MM-DD"},
		// 6
		{"maxConcurrency 0 is accepted", func(d map[string]any) { md(d)["maxConcurrency"] = 0 }, "", "", ""},
		{"maxConcurrency 3 is accepted", func(d map[string]any) { md(d)["maxConcurrency"] = 3 }, "", "", ""},
		{"negative maxConcurrency is rejected", func(d map[string]any) { md(d)["maxConcurrency"] = -1 }, "", "metadata.maxConcurrency", "non-negative"},
		{"fractional maxConcurrency is rejected", func(d map[string]any) { md(d)["maxConcurrency"] = 1.5 }, "", "metadata.maxConcurrency", "non-negative"},
		{"string maxConcurrency is rejected", func(d map[string]any) { md(d)["maxConcurrency"] = "2" }, "", "metadata.maxConcurrency", "non-negative"},
		{"planPath string is accepted", func(d map[string]any) { md(d)["planPath"] = "docs/plan.md" }, "", "", ""},
		{"planPath number is rejected", func(d map[string]any) { md(d)["planPath"] = 1 }, "", "metadata.planPath", "not a string or null"},
		// 7
		{"missing userStories is rejected", func(d map[string]any) { delete(d, "userStories") }, "", "userStories", "missing"},
		{"empty userStories is rejected", func(d map[string]any) { d["userStories"] = []any{} }, "", "userStories", "empty"},
		{"userStories object is rejected", func(d map[string]any) { d["userStories"] = map[string]any{} }, "", "userStories", "not an array"},
	}
}

// storyRuleCases are TestRules' cases of the stories (rules 8 to 12).
func storyRuleCases() []taskRuleCase {
	st := func(d map[string]any, i int) map[string]any { return d["userStories"].([]any)[i].(map[string]any) }
	return []taskRuleCase{
		// 8
		{"story that is not an object is rejected", func(d map[string]any) { d["userStories"] = []any{"US-001"} }, "", "userStories[0]", "not an object"},
		{"story without id is rejected", func(d map[string]any) { delete(st(d, 0), "id") }, "", "userStories[0].id", "missing"},
		{"story without title is rejected", func(d map[string]any) { delete(st(d, 1), "title") }, "", "title", `US-002 is missing "title"`},
		{"story without description is rejected", func(d map[string]any) { delete(st(d, 1), "description") }, "", "description", "missing"},
		{"story without acceptanceCriteria is rejected", func(d map[string]any) { delete(st(d, 1), "acceptanceCriteria") }, "", "acceptanceCriteria", "missing"},
		{"story without priority is rejected", func(d map[string]any) { delete(st(d, 1), "priority") }, "", "priority", "missing"},
		{"story without status is rejected", func(d map[string]any) { delete(st(d, 1), "status") }, "", "status", "missing"},
		{"story without dependsOn is rejected", func(d map[string]any) { delete(st(d, 1), "dependsOn") }, "", "dependsOn", "missing"},
		{"story without notes is accepted", func(d map[string]any) { delete(st(d, 1), "notes") }, "", "", ""},
		{"priority as a string is rejected", func(d map[string]any) { st(d, 1)["priority"] = "2" }, "", "priority", "not an integer"},
		{"fractional priority is rejected", func(d map[string]any) { st(d, 1)["priority"] = 2.5 }, "", "priority", "not an integer"},
		{"criteria with a number are rejected", func(d map[string]any) { st(d, 1)["acceptanceCriteria"] = []any{"a", 1} }, "", "acceptanceCriteria", "array of strings"},
		{"dependsOn string is rejected", func(d map[string]any) { st(d, 1)["dependsOn"] = "US-001" }, "", "dependsOn", "array of story ids"},
		{"title as a number is rejected", func(d map[string]any) { st(d, 1)["title"] = 5 }, "", "title", "not a string"},
		{"notes as a number is rejected", func(d map[string]any) { st(d, 1)["notes"] = 5 }, "", "notes", "not a string"},
		{"key differing only in case is rejected", func(d map[string]any) { st(d, 1)["ID"] = "US-009" }, "", "US-002.ID", "case-sensitive"},
		// 9
		{"story id with 4 digits is rejected", func(d map[string]any) { st(d, 2)["id"] = "US-0003" }, "", "id", "does not match"},
		{"title of 200 chars is accepted", func(d map[string]any) { st(d, 0)["title"] = strings.Repeat("é", 200) }, "", "", ""},
		{"title of 201 chars is rejected", func(d map[string]any) { st(d, 0)["title"] = strings.Repeat("é", 201) }, "", "title", "201 characters; the limit is 200"},
		{"description of 500 chars is accepted", func(d map[string]any) { st(d, 0)["description"] = strings.Repeat("日", 500) }, "", "", ""},
		{"description of 501 chars is rejected", func(d map[string]any) { st(d, 0)["description"] = strings.Repeat("d", 501) }, "", "description", "the limit is 500"},
		{"criterion of 300 chars is accepted", func(d map[string]any) {
			st(d, 0)["acceptanceCriteria"] = []any{strings.Repeat("🚀", 300), "Typecheck passes"}
		}, "", "", ""},
		{"criterion of 301 chars is rejected", func(d map[string]any) { st(d, 0)["acceptanceCriteria"] = []any{strings.Repeat("c", 301)} }, "", "acceptanceCriteria[0]", "the limit is 300"},
		// 10
		{"status done is rejected", func(d map[string]any) { st(d, 0)["status"] = "done" }, "", "status", `"done"`},
		// 11
		{"duplicate id is rejected", func(d map[string]any) { st(d, 2)["id"] = "US-002"; st(d, 2)["dependsOn"] = []any{} }, "", "id", "more than one story"},
		{"duplicate priority is rejected", func(d map[string]any) { st(d, 2)["priority"] = 1 }, "", "priority", "US-003.priority 1 is also the priority of US-001"},
		// 12
		{"self-reference is rejected", func(d map[string]any) { st(d, 0)["dependsOn"] = []any{"US-001"} }, "", "dependsOn", "references US-001 itself"},
		{"unknown reference is rejected", func(d map[string]any) { st(d, 0)["dependsOn"] = []any{"US-099"} }, "", "dependsOn", `"US-099" which does not exist`},
		{"malformed reference is rejected", func(d map[string]any) { st(d, 0)["dependsOn"] = []any{"1"} }, "", "dependsOn", `"1" is not a story id`},
		{"two-story cycle gives its path", func(d map[string]any) { st(d, 0)["dependsOn"] = []any{"US-002"} }, "", "dependsOn", "US-001 -> US-002 -> US-001"},
		{"long cycle gives its path", func(d map[string]any) { st(d, 0)["dependsOn"] = []any{"US-003"} }, "", "dependsOn", "US-001 -> US-003 -> US-001"},
	}
}

// checkTaskRule parses tc's document and checks it is valid or has tc's
// problem.
func checkTaskRule(t *testing.T, tc taskRuleCase) {
	data := []byte(tc.raw)
	if tc.raw == "" {
		d := validDoc()
		if tc.mut != nil {
			tc.mut(d)
		}
		data, _ = json.Marshal(d)
	}
	f, err := Parse(data)
	if tc.wantField == "" && tc.wantText == "" {
		if err != nil {
			t.Fatalf("want valid, got\n%v", err)
		}
		if f == nil {
			t.Fatal("nil file")
		}
		return
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	for _, p := range ps {
		if p.Field == tc.wantField && strings.Contains(p.Error, tc.wantText) {
			return
		}
	}
	t.Fatalf("want %s: %q, got\n%v", tc.wantField, tc.wantText, ps)
}

func TestProblemsNameTheStory(t *testing.T) {
	d := validDoc()
	d["userStories"].([]any)[1].(map[string]any)["dependsOn"] = []any{"US-099"}
	data, _ := json.Marshal(d)
	_, err := Parse(data)
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 {
		t.Fatalf("got %v", err)
	}
	want := "Error: Invalid tasks.json - US-002.dependsOn references \"US-099\" which does not exist.\n" +
		"Fix: Remove \"US-099\" from US-002.dependsOn or add a story with id \"US-099\"."
	if ps[0].String() != want || ps[0].StoryID != "US-002" {
		t.Fatalf("got\n%s\nwant\n%s", ps[0], want)
	}
}

func TestMissingTypecheckIsOnlyAWarning(t *testing.T) {
	d := validDoc()
	d["userStories"].([]any)[0].(map[string]any)["acceptanceCriteria"] = []any{"Works"}
	data, _ := json.Marshal(d)
	f, problems, warnings := Check(data)
	if f == nil || problems != nil {
		t.Fatalf("file rejected: %v", problems)
	}
	if len(warnings) != 1 || warnings[0].StoryID != "US-001" || !strings.Contains(warnings[0].String(), "Typecheck passes") {
		t.Fatalf("warnings = %v", warnings)
	}
	if len(f.Warnings()) != 1 {
		t.Errorf("File.Warnings = %v", f.Warnings())
	}
}

func ids(stories []Story) []string {
	out := []string{}
	for _, s := range stories {
		out = append(out, s.ID)
	}
	return out
}

func TestReady(t *testing.T) {
	fx := fixtures.Dir(t)
	load := func(name string) *File {
		f, err := Load(filepath.Join(fx, "tasks", "valid", name))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	diamond := load("2026-11-20-diamond-tasks.json") // 1 <- 2,3 <- 4; maxConcurrency 2
	roots := load("2026-11-20-roots-tasks.json")     // 1, 2 <- 3; default concurrency
	resume := load("2026-11-20-resume-tasks.json")   // 1 completed, 2 skipped, 3 <- 1,2, 4 <- 3
	linear := load("2026-11-20-linear-tasks.json")   // 1 <- 2 <- 3; maxConcurrency 1
	cases := []struct {
		name   string
		f      *File
		status map[string]Status
		want   []string
	}{
		{"only roots are ready at the start", diamond, nil, []string{"US-001"}},
		{"both branches of a diamond are ready after the root", diamond, map[string]Status{"US-001": Completed}, []string{"US-002", "US-003"}},
		{"join waits for every dependency", diamond, map[string]Status{"US-001": Completed, "US-002": Completed, "US-003": InProgress}, []string{}},
		{"stories in progress use up the concurrency", diamond, map[string]Status{"US-001": Completed, "US-002": InProgress}, []string{"US-003"}},
		{"no slot left means nothing is ready", linear, map[string]Status{"US-001": InProgress}, []string{}},
		{"independent roots are ready by priority", roots, nil, []string{"US-001", "US-002"}},
		{"skipped dependencies count as done", resume, nil, []string{"US-003"}},
		{"failed dependency blocks", diamond, map[string]Status{"US-001": Failed}, []string{}},
		{"failed story is not ready again by itself", diamond, map[string]Status{"US-001": Completed, "US-002": Failed, "US-003": Completed}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(tc.f.Ready(tc.status)); !slices.Equal(got, tc.want) {
				t.Fatalf("Ready = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadyOrdersByPriorityAndCaps(t *testing.T) {
	d := validDoc()
	stories := d["userStories"].([]any)
	for i, p := range []int{30, 10, 20} {
		stories[i].(map[string]any)["priority"] = p
		stories[i].(map[string]any)["dependsOn"] = []any{}
	}
	d["metadata"].(map[string]any)["maxConcurrency"] = 2
	data, _ := json.Marshal(d)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(f.Ready(nil)); !slices.Equal(got, []string{"US-002", "US-003"}) {
		t.Fatalf("Ready = %v", got)
	}
	if f.MaxConcurrencyOrDefault() != 2 {
		t.Errorf("MaxConcurrencyOrDefault = %d", f.MaxConcurrencyOrDefault())
	}
	f.Metadata.MaxConcurrency = 0
	if f.MaxConcurrencyOrDefault() != DefaultMaxConcurrency {
		t.Errorf("default concurrency = %d", f.MaxConcurrencyOrDefault())
	}
	if got := ids(f.Ready(nil)); !slices.Equal(got, []string{"US-002", "US-003", "US-001"}) {
		t.Fatalf("Ready with default cap = %v", got)
	}
}

func TestBlocked(t *testing.T) {
	data, _ := json.Marshal(validDoc())
	f, _ := Parse(data)
	got := f.Blocked(map[string]Status{"US-001": Failed})
	if len(got) != 2 || got[0].StoryID != "US-002" || !slices.Equal(got[0].FailedDeps, []string{"US-001"}) || got[1].StoryID != "US-003" {
		t.Fatalf("Blocked = %+v", got)
	}
}

func TestSetStatusFollowsTheTransitionTable(t *testing.T) {
	data, _ := json.Marshal(validDoc())
	f, _ := Parse(data)
	if err := f.SetStatus("US-001", Completed, ""); err == nil {
		t.Fatal("pending -> completed allowed")
	}
	for _, to := range []Status{InProgress, Failed, InProgress, Completed} {
		if err := f.SetStatus("US-001", to, "note "+string(to)); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ := f.Story("US-001"); s.Status != Completed || s.Notes != "note completed" {
		t.Fatalf("story = %+v", s)
	}
	if err := f.SetStatus("US-404", InProgress, ""); err == nil {
		t.Fatal("unknown story accepted")
	}
	if _, ok := f.Story("US-404"); ok {
		t.Fatal("Story found an unknown id")
	}
}

func TestMarshalKeepsUnknownFieldsAndOrder(t *testing.T) {
	d := validDoc()
	d["x-planner"] = map[string]any{"version": "1.2"}
	d["metadata"].(map[string]any)["estimate"] = "2d"
	d["userStories"].([]any)[2].(map[string]any)["owner"] = "<team & co>"
	data, _ := json.Marshal(d)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetStatus("US-001", InProgress, ""); err != nil {
		t.Fatal(err)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"x-planner": {`, `"estimate": "2d"`, `"owner": "\u003cteam`, "\n  \"metadata\": {\n    \"title\""} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	g, err := Parse(out)
	if err != nil {
		t.Fatalf("written file does not parse: %v", err)
	}
	if !slices.Equal(ids(g.UserStories), []string{"US-001", "US-002", "US-003"}) || g.UserStories[0].Status != InProgress {
		t.Fatalf("stories = %+v", g.UserStories)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
}

// FuzzTasksParse: the parser never panics, and an accepted file writes back
// to a file that parses to the same model.
func FuzzTasksParse(f *testing.F) {
	data, _ := json.Marshal(validDoc())
	f.Add(data)
	f.Add([]byte(`{"schemaVersion":"3.0","userStories":[{"id":"US-001","dependsOn":["US-001"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, problems, _ := Check(data)
		if (file == nil) == (len(problems) == 0) {
			t.Fatalf("file %v with problems %v", file != nil, problems)
		}
		for _, p := range problems {
			if p.Error == "" || p.Fix == "" {
				t.Fatalf("problem without text: %+v", p)
			}
		}
		if file == nil {
			return
		}
		file.Ready(nil)
		out, err := file.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("write-back does not parse: %v\n%s", err, out)
		}
		out2, _ := again.Marshal()
		if string(out) != string(out2) {
			t.Fatalf("write-back not stable:\n%s\n%s", out, out2)
		}
	})
}

func TestStoppedStoryIsPutBackToPending(t *testing.T) {
	data, _ := json.Marshal(validDoc())
	f, _ := Parse(data)
	for _, to := range []Status{InProgress, Pending} {
		if err := f.SetStatus("US-001", to, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []Status{InProgress, Completed} {
		if err := f.SetStatus("US-001", to, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SetStatus("US-001", Pending, ""); err == nil {
		t.Fatal("completed -> pending allowed")
	}
}
