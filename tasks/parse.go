package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/gitref"
)

// Bounds of a check's answer: a hostile file may break a rule thousands of
// times, and each message quotes values of the file.
const (
	// MaxProblems is how many problems (and, apart, warnings) are listed;
	// the last entry of a longer list counts the rest (Problem.Omitted).
	MaxProblems = 50
	// MaxAnswerBytes bounds Problems.Error() of any file.
	MaxAnswerBytes = 32 << 10
	// maxTextBytes bounds one Error or one Fix text.
	maxTextBytes = 300
	// maxCycles is how many dependency cycles are spelt out.
	maxCycles = 10
	// maxCycleIDs is how many ids of one cycle are spelt out.
	maxCycleIDs = 16
)

// Length limits of spec/tasks-v3.md, in characters.
const (
	MaxTitleChars       = 200
	MaxDescriptionChars = 500
	MaxCriterionChars   = 300
)

// TypecheckCriterion is the criterion planners add to every story; a story
// without it gets a warning, not an error.
const TypecheckCriterion = "Typecheck passes"

// metadataTypes are the allowed metadata.type values.
var metadataTypes = []string{"feat", "ref", "bug", "chore"}

// Problem is one thing wrong with a task file, in the spec's two-line
// Error/Fix form.
type Problem struct {
	StoryID string // the story concerned, as written in the file; empty for file-level problems
	Field   string // e.g. dependsOn, priority, metadata.branchName
	Error   string // what is wrong, naming the story and field
	Fix     string // how to fix it
	// Omitted is set on the last entry of a list cut at MaxProblems: how
	// many more problems were found and not listed.
	Omitted int
}

// String renders the two-line form:
//
//	Error: Invalid tasks.json - US-003.dependsOn references "US-099" which does not exist.
//	Fix: Remove "US-099" from US-003.dependsOn or add a story with id "US-099".
func (p Problem) String() string {
	return "Error: " + p.Error + "\nFix: " + p.Fix
}

// Problems is every problem of a task file; as an error it prints all of
// them in the Error/Fix form.
type Problems []Problem

// Count is the number of problems found: those listed plus those left out.
func (ps Problems) Count() int {
	if len(ps) == 0 {
		return 0
	}
	return len(ps) + ps[len(ps)-1].Omitted
}

func (ps Problems) Error() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, "\n")
}

// Parse reads and validates a task file. A file that breaks any rule yields
// a nil *File and a Problems error listing every problem found.
func Parse(data []byte) (*File, error) {
	f, problems, _ := Check(data)
	if len(problems) > 0 {
		return nil, problems
	}
	return f, nil
}

// Load reads (as ReadFile does) and validates the task file at path. A read
// failure is returned wrapped (errors.Is(err, fs.ErrNotExist) works); an
// invalid file yields Problems.
func Load(path string) (*File, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// LoadIn reads (as ReadFileIn does) and validates the task file rel of the
// repository at repo.
func LoadIn(repo, rel string) (*File, error) {
	data, err := ReadFileIn(repo, rel)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Check validates data against every rule of spec/tasks-v3.md and returns the
// parsed file (nil when there are problems), the problems, and the warnings
// (stories without "Typecheck passes"), which never make a file invalid.
func Check(data []byte) (*File, Problems, Problems) {
	c := &checker{}
	c.file(data)
	c.finish()
	if len(c.problems) > 0 {
		return nil, c.problems, c.warnings
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		// Unreachable when the checks above pass; report rather than panic.
		return nil, Problems{{Field: "", Error: "Invalid tasks.json - " + err.Error() + ".",
			Fix: "Report this file to the aimi swarm maintainers: it passed validation but does not decode."}}, c.warnings
	}
	return &f, nil, c.warnings
}

// Validate re-checks a File built or changed in code.
func (f *File) Validate() error {
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	if _, problems, _ := Check(data); len(problems) > 0 {
		return problems
	}
	return nil
}

// Warnings lists the non-fatal findings: stories without "Typecheck passes".
func (f *File) Warnings() Problems {
	var out Problems
	for _, s := range f.UserStories {
		out = typecheckWarning(out, s.ID, s.AcceptanceCriteria)
	}
	return out
}

func typecheckWarning(out Problems, id string, criteria []string) Problems {
	for _, c := range criteria {
		if strings.EqualFold(strings.TrimSpace(c), TypecheckCriterion) {
			return out
		}
	}
	return append(out, Problem{StoryID: id, Field: "acceptanceCriteria",
		Error: fmt.Sprintf("%s.acceptanceCriteria does not include %q.", id, TypecheckCriterion),
		Fix:   fmt.Sprintf("Add %q to %s.acceptanceCriteria if the project has a type checker; otherwise ignore this warning.", TypecheckCriterion, id)})
}

type checker struct {
	problems Problems
	warnings Problems
	// omitted counts what was found after the lists reached MaxProblems.
	omittedProblems, omittedWarnings int
}

func (c *checker) add(storyID, field, errMsg, fix string) {
	if len(c.problems) >= MaxProblems {
		c.omittedProblems++
		return
	}
	c.problems = append(c.problems, Problem{StoryID: storyID, Field: field,
		Error: cut("Invalid tasks.json - "+errMsg, maxTextBytes), Fix: cut(fix, maxTextBytes)})
}

func (c *checker) warn(storyID string, criteria []string) {
	if len(c.warnings) >= MaxProblems {
		if len(typecheckWarning(nil, storyID, criteria)) > 0 {
			c.omittedWarnings++
		}
		return
	}
	c.warnings = typecheckWarning(c.warnings, cut(storyID, maxTextBytes/4), criteria)
}

// finish closes each list that reached MaxProblems with an entry that says
// how many more there are.
func (c *checker) finish() {
	if c.omittedProblems > 0 {
		c.problems = append(c.problems, Problem{Omitted: c.omittedProblems,
			Error: fmt.Sprintf("Invalid tasks.json - %d more problems are not listed.", c.omittedProblems),
			Fix:   "Fix the problems above and validate the file again to see the rest."})
	}
	if c.omittedWarnings > 0 {
		c.warnings = append(c.warnings, Problem{Omitted: c.omittedWarnings,
			Error: fmt.Sprintf("%d more stories lack %q; they are not listed.", c.omittedWarnings, TypecheckCriterion),
			Fix:   "Add it to those stories too, or ignore these warnings."})
	}
}

// cut shortens s to at most max bytes (on a rune boundary), marking the cut:
// values from the file (ids, statuses, keys) are quoted in messages and may
// be megabytes long.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	end := max - len(mark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

// object decodes raw as a JSON object; ok is false for anything else
// (including null).
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false
	}
	return m, true
}

// str returns obj[key] as a string; present reports the key exists, ok that
// it is a JSON string.
func str(obj map[string]json.RawMessage, key string) (s string, present, ok bool) {
	raw, present := obj[key]
	if !present {
		return "", false, false
	}
	err := json.Unmarshal(raw, &s)
	return s, true, err == nil && bytes.TrimSpace(raw)[0] == '"'
}

// integer parses a JSON integer literal (no fraction or exponent).
func integer(raw json.RawMessage) (int, bool) {
	n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	return n, err == nil
}

func kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// caseKeys rejects keys that differ from a known key only in case:
// encoding/json matches keys case-insensitively, so {"id":..,"ID":..} would
// decode to a value other than the one validated.
func (c *checker) caseKeys(obj map[string]json.RawMessage, known []string, storyID, where string) {
	for k := range obj {
		for _, want := range known {
			if k != want && strings.EqualFold(k, want) {
				c.add(storyID, where+k, fmt.Sprintf("%s has the key %q; keys are case-sensitive.", strings.TrimSuffix(where, "."), k),
					fmt.Sprintf("Rename %q to %q (or remove it).", k, want))
			}
		}
	}
}

func (c *checker) file(data []byte) {
	top, ok := object(data)
	if !ok {
		detail := "it is " + kind(data)
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				detail = fmt.Sprintf("it is not valid JSON (%v at byte %d)", se, se.Offset)
			} else {
				detail = "it is not valid JSON (" + err.Error() + ")"
			}
		}
		c.add("", "", "the file is not a JSON object: "+detail+".",
			`Make the file one JSON object with "schemaVersion": "3.0", "metadata" and "userStories" (regenerate it with the aimi planner if it is damaged).`)
		return
	}
	c.caseKeys(top, fileKeys, "", "file.")
	switch v, present, isStr := str(top, "schemaVersion"); {
	case !present:
		c.add("", "schemaVersion", "schemaVersion is missing.", `Add "schemaVersion": "3.0" at the top of the file.`)
	case !isStr || v != SchemaVersion:
		c.add("", "schemaVersion", fmt.Sprintf("schemaVersion is %s, expected \"3.0\".", string(bytes.TrimSpace(top["schemaVersion"]))),
			`Set "schemaVersion": "3.0" and bring the file to the 3.0 shape (regenerate it with the current aimi planner).`)
	}
	c.metadata(top)
	c.stories(top)
}

func (c *checker) metadata(top map[string]json.RawMessage) {
	raw, present := top["metadata"]
	md, ok := object(raw)
	if !ok {
		what := "missing"
		if present {
			what = kind(raw) + ", not an object"
		}
		c.add("", "metadata", "metadata is "+what+".",
			`Add a "metadata" object with title, type, branchName and createdAt.`)
		return
	}
	c.caseKeys(md, metadataKeys, "", "metadata.")
	if v, present, isStr := str(md, "title"); !isStr || strings.TrimSpace(v) == "" {
		what := "empty"
		if !present {
			what = "missing"
		} else if !isStr {
			what = kind(md["title"]) + ", not a string"
		}
		c.add("", "metadata.title", "metadata.title is "+what+".", `Set metadata.title to a short description of the feature, e.g. "feat: Add task status".`)
	}
	if v, present, isStr := str(md, "type"); !isStr || !contains(metadataTypes, v) {
		got := "missing"
		if present {
			got = string(bytes.TrimSpace(md["type"]))
		}
		c.add("", "metadata.type", fmt.Sprintf("metadata.type is %s; it must be one of feat, ref, bug, chore.", got),
			`Set metadata.type to one of "feat", "ref", "bug", "chore".`)
	}
	if v, present, isStr := str(md, "branchName"); !isStr || gitref.CheckBranch(v) != nil {
		var what string
		switch {
		case !present:
			what = "metadata.branchName is missing."
		case !isStr:
			what = "metadata.branchName is " + kind(md["branchName"]) + ", not a string."
		default:
			what = "metadata.branchName: " + gitref.CheckBranch(v).Error() + "."
		}
		c.add("", "metadata.branchName", what,
			fmt.Sprintf(`Set metadata.branchName to a branch name git accepts, made of letters, digits, '/', '_' and '-', starting with a letter or digit, without "//" or a trailing '/', at most %d bytes, e.g. "feat/add-task-status".`, gitref.MaxBranchBytes))
	}
	if v, present, isStr := str(md, "createdAt"); !isStr || !validDate(v) {
		got := "missing"
		if present {
			got = string(bytes.TrimSpace(md["createdAt"]))
		}
		c.add("", "metadata.createdAt", fmt.Sprintf("metadata.createdAt is %s, not a YYYY-MM-DD date.", got),
			`Set metadata.createdAt to the plan's date as YYYY-MM-DD, e.g. "2026-02-27".`)
	}
	if raw, present := md["planPath"]; present && kind(raw) != "a string" && kind(raw) != "null" {
		c.add("", "metadata.planPath", "metadata.planPath is "+kind(raw)+", not a string or null.", "Set metadata.planPath to the plan's path, or null.")
	}
	if raw, present := md["brainstormPath"]; present && kind(raw) != "a string" {
		c.add("", "metadata.brainstormPath", "metadata.brainstormPath is "+kind(raw)+", not a string.", "Set metadata.brainstormPath to a path, or remove it.")
	}
	if raw, present := md["maxConcurrency"]; present {
		if n, ok := integer(raw); !ok || n < 0 {
			c.add("", "metadata.maxConcurrency", fmt.Sprintf("metadata.maxConcurrency is %s, not a non-negative integer.", string(bytes.TrimSpace(raw))),
				fmt.Sprintf("Set metadata.maxConcurrency to a positive integer, or remove it to use the default (%d).", DefaultMaxConcurrency))
		}
	}
}

func validDate(s string) bool {
	if len(s) != len("2006-01-02") {
		return false
	}
	_, err := time.Parse("2006-01-02", s)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// storyInfo is what the graph checks need from a story that parsed well
// enough to be identified.
type storyInfo struct {
	label     string // id, or userStories[i] when the id is unusable
	id        string // valid id, or ""
	dependsOn []string
}

func (c *checker) stories(top map[string]json.RawMessage) {
	raw, present := top["userStories"]
	var list []json.RawMessage
	if !present || kind(raw) != "an array" || json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		what := "missing"
		switch {
		case present && kind(raw) != "an array":
			what = kind(raw) + ", not an array"
		case present:
			what = "empty"
		}
		c.add("", "userStories", "userStories is "+what+".", "Add at least one story to userStories (a task file with nothing to do is not a task file).")
		return
	}
	infos := make([]storyInfo, 0, len(list))
	firstByID := map[string]int{}
	byPriority := map[int]string{}
	for i, sraw := range list {
		info, prio, hasPrio := c.story(i, sraw)
		infos = append(infos, info)
		if info.id != "" {
			if j, dup := firstByID[info.id]; dup {
				c.add(info.id, "id", fmt.Sprintf("%s is the id of more than one story (userStories[%d] and userStories[%d]).", info.id, j, i),
					fmt.Sprintf("Give userStories[%d] an unused id and update the dependsOn lists that mean it.", i))
				infos[i].id = "" // keep the graph checks on the first one
			} else {
				firstByID[info.id] = i
			}
		}
		if hasPrio {
			if other, dup := byPriority[prio]; dup {
				c.add(info.label, "priority", fmt.Sprintf("%s.priority %d is also the priority of %s.", info.label, prio, other),
					fmt.Sprintf("Give %s a priority no other story uses (lower runs first).", info.label))
			} else {
				byPriority[prio] = info.label
			}
		}
	}
	c.graph(infos, firstByID)
}
