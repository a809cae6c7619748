package notify

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// notice maps an event to the notice people get, if any.
func (n *Notifier) notice(e api.Event) (Notice, bool) {
	no := Notice{Time: e.Time.UTC(), Repo: clean(e.RepoPath), SwarmID: clean(e.SwarmID), Container: clean(e.ContainerName),
		StoryID: clean(e.StoryID), Status: clean(e.Status), Code: clean(e.Code), RequestID: clean(e.RequestID)}
	if n.cfg.Board != nil {
		no.Board = n.cfg.Board()
	}
	repo := filepath.Base(no.Repo)
	switch e.Kind {
	case api.EventPermissionRequested:
		no.Kind = KindRequestWaiting
		what, answers := clean(e.Output), "allow|reject"
		if e.Request != nil {
			what = clean(e.Request.Title) + " (" + clean(e.Request.Kind) + ")"
			if e.Request.Kind == "fetch" {
				// The egress proxy's request (egress.ask): its title names
				// the host and port only, never a path or query string.
				answers = "once|container|swarm|reject"
				if n := len(e.Request.Containers); n > 1 {
					what += fmt.Sprintf(" for %d containers", n)
				}
			}
		}
		no.Text = fmt.Sprintf("%s: %s story %s asks: %s. Answer: aimi swarm answer %s %s", repo, no.Container, dash(no.StoryID), what, no.RequestID, answers)
	case api.EventContainerExited:
		if e.Status == "failed" {
			no.Kind = KindContainerFailed
			no.Text = fmt.Sprintf("%s: %s failed (%s)", repo, no.Container, dash(no.Code))
			if no.StoryID != "" {
				no.Text += " at story " + no.StoryID
			}
		} else {
			no.Kind = KindContainerFinished
			no.Text = fmt.Sprintf("%s: %s finished: %s", repo, no.Container, dash(no.Status))
		}
	case api.EventConflictDetected:
		if e.Conflict == nil {
			return Notice{}, false
		}
		no.Kind = KindConflict
		no.Text = fmt.Sprintf("%s: %s would conflict on %s", repo, conflictPair(e.Conflict), conflictFiles(e.Conflict.Files))
	case api.EventSwarmFinished:
		no.Kind = KindSwarmFinished
		no.Text = fmt.Sprintf("%s: swarm %s finished", repo, no.SwarmID)
	default:
		return Notice{}, false
	}
	if no.Board != "" {
		no.Text += " " + no.Board
	}
	return no, true
}

// maxListed bounds the containers a limit wait's notice lists.
const maxListed = 10

// Limit is what a limit wait's notice tells: the model provider, when
// its limit was first seen (Since, the notice's time) and when it resets
// (Until), and the containers of one swarm whose calls wait, with the
// swarm's repository (Repo and SwarmID "" when unknown).
type Limit struct {
	Provider     string
	Since, Until time.Time
	Repo         string
	SwarmID      string
	Containers   []string
}

// LimitWait queues the notice that a model provider's limit holds the
// calls of l's containers until it resets. Like Send it never blocks.
func (n *Notifier) LimitWait(l Limit) {
	since := l.Since
	if since.IsZero() {
		since = time.Now()
	}
	no := Notice{Kind: KindLimitWait, Time: since.UTC(), Provider: clean(l.Provider), Until: l.Until.UTC(),
		Repo: clean(l.Repo), SwarmID: clean(l.SwarmID)}
	for i, c := range l.Containers {
		if i == maxListed {
			break
		}
		no.Containers = append(no.Containers, clean(c))
	}
	if n.cfg.Board != nil {
		no.Board = n.cfg.Board()
	}
	who := strings.Join(no.Containers, ", ")
	if more := len(l.Containers) - len(no.Containers); more > 0 {
		who += fmt.Sprintf(" and %d more", more)
	}
	no.Text = fmt.Sprintf("model provider %s is limited until %s; waiting: %s", dash(no.Provider), no.Until.Format("15:04:05 UTC"), dash(who))
	if no.Repo != "" {
		no.Text = filepath.Base(no.Repo) + ": " + no.Text
	}
	if no.Board != "" {
		no.Text += " " + no.Board
	}
	n.Send(no)
}

// conflictPair names the pair of a conflict: "a and b", or "a onto main".
func conflictPair(c *api.Conflict) string {
	names := make([]string, 0, 2)
	for _, n := range c.Containers[:min(len(c.Containers), 2)] {
		names = append(names, clean(n))
	}
	if c.Onto != "" {
		return strings.Join(names, " and ") + " onto " + clean(c.Onto)
	}
	return strings.Join(names, " and ")
}

// conflictFiles is the first of a conflict's files, and how many more.
func conflictFiles(files []string) string {
	shown := make([]string, 0, maxListed)
	for _, f := range files[:min(len(files), maxListed)] {
		shown = append(shown, clean(f))
	}
	s := strings.Join(shown, ", ")
	if more := len(files) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return dash(s)
}

// clean makes agent or container text one bounded line with no control
// character.
func clean(s string) string {
	return strings.TrimSpace(termsafe.Line(s, maxText))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
