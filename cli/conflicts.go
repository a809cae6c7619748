package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/aimi-tools/swarm/api"
)

// maxConflictFiles bounds the files a conflict's line names.
const maxConflictFiles = 5

// printConflicts lists the pairs the conflict radar says would conflict,
// a line each, and counts the overlaps (status --json lists them).
func printConflicts(w io.Writer, v api.SwarmView) {
	var lines []string
	overlaps := 0
	for _, c := range v.Conflicts {
		if c.Kind != "conflict" {
			overlaps++
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s  %s", conflictPair(c), conflictFiles(c.Files)))
	}
	if len(lines) > 0 {
		fmt.Fprintln(w, "Conflicts (the branches would not merge cleanly):")
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
	if overlaps > 0 {
		fmt.Fprintf(w, "Overlaps: %d pair(s) changed the same files and merge cleanly (status --json lists them)\n", overlaps)
	}
}

// conflictPair names a pair: "a and b", or "a onto main".
func conflictPair(c api.Conflict) string {
	names := make([]string, len(c.Containers))
	for i, n := range c.Containers {
		names[i] = oneLine(n, 80)
	}
	if c.Onto != "" {
		return strings.Join(names, " and ") + " onto " + oneLine(c.Onto, 80)
	}
	return strings.Join(names, " and ")
}

// conflictFiles is the first files of a pair, and how many more.
func conflictFiles(files []string) string {
	shown := make([]string, 0, maxConflictFiles)
	for _, f := range files[:min(len(files), maxConflictFiles)] {
		shown = append(shown, oneLine(f, 120))
	}
	s := strings.Join(shown, ", ")
	if n := len(files) - len(shown); n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// withMembers is the state document doc with the view's members the
// state file does not keep (the radar's conflicts, the last land) added,
// in order, as members of its own object: status --json prints the state
// file's shape plus what only the daemon knows.
func withMembers(doc []byte, members ...member) []byte {
	if len(doc) < 2 || doc[0] != '{' || doc[len(doc)-1] != '}' {
		return doc
	}
	out := append([]byte(nil), doc[:len(doc)-1]...)
	empty := len(bytes.TrimSpace(doc[1:len(doc)-1])) == 0
	for _, m := range members {
		v := bytes.TrimSpace(m.value)
		if len(v) == 0 || bytes.Equal(v, []byte("null")) {
			continue
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = append(append(append(out, '"'), m.name...), `":`...)
		out = append(out, v...)
	}
	return append(out, '}')
}

// member is one named JSON value for withMembers.
type member struct {
	name  string
	value []byte
}
