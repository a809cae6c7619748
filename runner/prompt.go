package runner

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/tasks"
)

// buildPrompt is the one prompt a story's agent session gets: the feature,
// the story with its criteria and notes, what its dependencies did, and the
// rules of the sandbox.
func buildPrompt(f *tasks.File, s tasks.Story, taskPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are implementing one user story of the feature %q (%s) in the git repository in your working directory, on branch %s.\n\n",
		f.Metadata.Title, f.Metadata.Type, f.Metadata.BranchName)
	fmt.Fprintf(&b, "Story %s: %s\n\n%s\n\n", s.ID, s.Title, s.Description)
	if len(s.AcceptanceCriteria) > 0 {
		b.WriteString("Acceptance criteria:\n")
		for _, c := range s.AcceptanceCriteria {
			fmt.Fprintf(&b, "- %s\n", c)
		}
		b.WriteString("\n")
	}
	if n := strings.TrimSpace(s.Notes); n != "" {
		fmt.Fprintf(&b, "Notes:\n%s\n\n", n)
	}
	if len(s.DependsOn) > 0 {
		b.WriteString(demoagent.DependencySection + "\n")
		byID := map[string]tasks.Story{}
		for _, o := range f.UserStories {
			byID[o.ID] = o
		}
		for _, id := range s.DependsOn {
			d := byID[id]
			fmt.Fprintf(&b, "- %s %q: %s", id, d.Title, d.Status)
			if n := strings.TrimSpace(d.Notes); n != "" {
				fmt.Fprintf(&b, ". Notes: %s", oneLine(n, 600))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Rules: work only inside the working directory. Do not commit, push or switch branches; the runner commits after you finish. Do not edit %s; the runner records the story's status there. When you are done, end your turn with a short summary of what you changed and how you checked it.\n", taskPath)
	return b.String()
}

// oneLine collapses whitespace and cuts s to at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// tail returns the last n characters of s.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		return "…" + string(r[len(r)-n+1:])
	}
	return s
}

// lastWords is the end of an agent's stderr for a failure summary: whitespace
// collapsed, control characters dropped, and the last n characters kept,
// since an agent that dies says why last.
func lastWords(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	return tail(strings.Join(strings.Fields(s), " "), n)
}
