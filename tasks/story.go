package tasks

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/acpmsg"
)

// story checks one story; it returns what the graph and uniqueness checks
// need.
func (c *checker) story(i int, raw json.RawMessage) (info storyInfo, prio int, hasPrio bool) {
	info.label = fmt.Sprintf("userStories[%d]", i)
	s, ok := object(raw)
	if !ok {
		c.add("", info.label, info.label+" is "+kind(raw)+", not an object.", "Make every entry of userStories a story object.")
		return info, 0, false
	}
	// The id first: every other message names the story by it.
	sid := c.storyID(i, s, &info)
	c.caseKeys(s, storyKeys, sid, info.label+".")
	f := storyFields{c: c, s: s, sid: sid, label: info.label}
	f.text()
	f.criteria()
	prio, hasPrio = f.priority()
	f.status()
	info.dependsOn = f.dependsOn()
	if nraw, present := s["notes"]; present && kind(nraw) != "a string" {
		f.wrongType("notes", "a string", `""`)
	}
	return info, prio, hasPrio
}

// storyID checks the id of userStories[i], sets info's label and id from
// it, and returns the id the story's messages carry ("" when it is not a
// string).
func (c *checker) storyID(i int, s map[string]json.RawMessage, info *storyInfo) string {
	id, idPresent, idIsStr := str(s, "id")
	switch {
	case !idPresent:
		c.add("", info.label+".id", info.label+" is missing \"id\".", fmt.Sprintf(`Add an "id" like "US-%03d" to %s.`, i+1, info.label))
	case !idIsStr:
		c.add("", info.label+".id", fmt.Sprintf("%s.id is %s, not a string.", info.label, kind(s["id"])), fmt.Sprintf(`Set %s.id to a string like "US-%03d".`, info.label, i+1))
	case !acpmsg.ValidStoryID(id):
		c.add(id, "id", fmt.Sprintf("%s.id %q does not match %s.", info.label, id, acpmsg.PatternStoryID),
			fmt.Sprintf(`Rename %q to an id like "US-%03d" and update every dependsOn that references it.`, id, i+1))
		info.label = id
	default:
		info.label, info.id = id, id
	}
	if idIsStr {
		return id
	}
	return ""
}

// storyFields checks the fields of one story object, every message naming
// the story by label and carrying sid.
type storyFields struct {
	c     *checker
	s     map[string]json.RawMessage
	sid   string
	label string
}

func (f storyFields) missing(field, example string) {
	f.c.add(f.sid, field, fmt.Sprintf("%s is missing %q.", f.label, field), fmt.Sprintf("Add %q to %s, e.g. %s.", field, f.label, example))
}

func (f storyFields) wrongType(field, want, example string) {
	f.c.add(f.sid, field, fmt.Sprintf("%s.%s is %s, not %s.", f.label, field, kind(f.s[field]), want), fmt.Sprintf("Set %s.%s to %s, e.g. %s.", f.label, field, want, example))
}

func (f storyFields) tooLong(field string, n, max int) {
	f.c.add(f.sid, field, fmt.Sprintf("%s.%s is %d characters; the limit is %d.", f.label, field, n, max),
		fmt.Sprintf("Shorten %s.%s to at most %d characters (move details to notes).", f.label, field, max))
}

// text checks title and description.
func (f storyFields) text() {
	for _, t := range []struct {
		name, example string
		max           int
	}{{"title", `"Add status field"`, MaxTitleChars}, {"description", `"As a developer, I need ..."`, MaxDescriptionChars}} {
		switch v, present, isStr := str(f.s, t.name); {
		case !present:
			f.missing(t.name, t.example)
		case !isStr:
			f.wrongType(t.name, "a string", t.example)
		case utf8.RuneCountInString(v) > t.max:
			f.tooLong(t.name, utf8.RuneCountInString(v), t.max)
		}
	}
}

func (f storyFields) criteria() {
	craw, present := f.s["acceptanceCriteria"]
	if !present {
		f.missing("acceptanceCriteria", `["Typecheck passes"]`)
		return
	}
	criteria, ok := stringList(craw)
	if !ok {
		f.wrongType("acceptanceCriteria", "an array of strings", `["Typecheck passes"]`)
		return
	}
	for j, cr := range criteria {
		if n := utf8.RuneCountInString(cr); n > MaxCriterionChars {
			f.tooLong(fmt.Sprintf("acceptanceCriteria[%d]", j), n, MaxCriterionChars)
		}
	}
	f.c.warn(f.label, criteria)
}

func (f storyFields) priority() (prio int, ok bool) {
	praw, present := f.s["priority"]
	if !present {
		f.missing("priority", "1")
		return 0, false
	}
	n, ok := integer(praw)
	if !ok {
		f.wrongType("priority", "an integer", "1")
		return 0, false
	}
	return n, true
}

func (f storyFields) status() {
	switch v, present, isStr := str(f.s, "status"); {
	case !present:
		f.missing("status", `"pending"`)
	case !isStr:
		f.wrongType("status", "a string", `"pending"`)
	case !Status(v).Valid():
		f.c.add(f.sid, "status", fmt.Sprintf("%s.status is %q; it must be one of pending, in_progress, completed, failed, skipped.", f.label, v),
			fmt.Sprintf(`Set %s.status to one of "pending", "in_progress", "completed", "failed", "skipped" ("pending" for work not started).`, f.label))
	}
}

func (f storyFields) dependsOn() []string {
	draw, present := f.s["dependsOn"]
	if !present {
		f.missing("dependsOn", "[] or [\"US-001\"]")
		return nil
	}
	deps, ok := stringList(draw)
	if !ok {
		f.wrongType("dependsOn", "an array of story ids", `["US-001"]`)
		return nil
	}
	return deps
}

func stringList(raw json.RawMessage) ([]string, bool) {
	if kind(raw) != "an array" {
		return nil, false
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, false
	}
	return out, true
}
