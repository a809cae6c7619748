package board

import (
	"net/url"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// Bounds of untrusted text on the page.
const (
	maxText  = 2000 // outputs, errors, journal lines
	maxTitle = 200  // story titles
)

// listJSON is the page's whole picture: every swarm by repository.
type listJSON struct {
	Swarms []swarmJSON `json:"swarms"`
}

type swarmJSON struct {
	Repo       string          `json:"repo"`
	SwarmID    string          `json:"swarmId"`
	CreatedAt  time.Time       `json:"createdAt"`
	Containers []containerJSON `json:"containers"`
	// Land is the swarm's last land (the train), nil before one.
	Land *landJSON `json:"land"`
	// Attempts are the task files run several times (attempts.go).
	Attempts []attemptSetJSON `json:"attempts"`
}

// landJSON is a land as the page shows it: where, and each branch's
// outcome in landing order.
type landJSON struct {
	Branch  string           `json:"branch"`
	Onto    string           `json:"onto"`
	Running bool             `json:"running"`
	Cut     bool             `json:"cut"`
	Results []landResultJSON `json:"results"`
	// Cost is the land's own: its checks and fix-ups.
	Cost float64 `json:"cost"`
}

// landResultJSON is one branch of the train; Cost is its container's
// (as `aimi swarm usage` has it), RunsCost its checks' and fix-ups'.
type landResultJSON struct {
	Container string  `json:"container"`
	Outcome   string  `json:"outcome"`
	Reason    string  `json:"reason"`
	Fixup     string  `json:"fixup"`
	Cost      float64 `json:"cost"`
	RunsCost  float64 `json:"runsCost"`
}

// boardLand is rep for the page, cleaned.
func boardLand(rep *api.LandReport) *landJSON {
	if rep == nil {
		return nil
	}
	l := &landJSON{Branch: clean(rep.Branch, maxTitle), Onto: clean(rep.Onto, maxTitle), Running: rep.Running, Cut: rep.Cut, Results: []landResultJSON{}, Cost: rep.Cost}
	for _, r := range rep.Results {
		l.Results = append(l.Results, landResultJSON{Container: clean(r.Container, maxTitle), Outcome: clean(r.Outcome, maxTitle),
			Reason: clean(r.Reason, maxText), Fixup: clean(r.Fixup, maxTitle), Cost: r.Cost, RunsCost: r.RunsCost})
	}
	return l
}

// containerJSON merges a state entry with the daemon's detail of it.
type containerJSON struct {
	Name       string      `json:"name"`
	TaskFile   string      `json:"taskFile"`
	Branch     string      `json:"branch"`
	Status     string      `json:"status"`
	Node       string      `json:"node"`
	CreatedAt  time.Time   `json:"createdAt"`
	UpdatedAt  time.Time   `json:"updatedAt"`
	ExitCode   *int        `json:"exitCode"`
	OOMKilled  bool        `json:"oomKilled"`
	Finished   bool        `json:"finished"`
	PRURL      string      `json:"prUrl"`
	LastOutput string      `json:"lastOutput"`
	Errors     []errorJSON `json:"errors"`
	Rejected   int         `json:"rejected"`
	// EgressDenied and GitRefused count the requests the egress proxy
	// and the git service refused.
	EgressDenied int          `json:"egressDenied"`
	GitRefused   int          `json:"gitRefused"`
	Stories      []storyJSON  `json:"stories"`
	Progress     progressJSON `json:"progress"`
	// LimitWaits say what the container's model calls wait for at the
	// gateway now ("waiting for anthropic limit until 15:04:05").
	LimitWaits []string `json:"limitWaits"`
	// EgressGranted are the hosts a person let the container reach
	// through the inbox (egress.ask), with their scope: "pkg.example:443
	// (swarm)".
	EgressGranted []string `json:"egressGranted"`
	// Conflicts name what the container's branch would conflict with (the
	// conflict radar): another container, or "main (the landing target)".
	Conflicts []conflictJSON `json:"conflicts"`
	// Picked: an attempt of a task file run several times, and its pick
	// (absent for a task file run once).
	Picked *bool `json:"picked,omitempty"`
}

// conflictJSON is one conflict of a container's branch, for its badge.
type conflictJSON struct {
	With  string   `json:"with"`
	Files []string `json:"files"`
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type storyJSON struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	DependsOn []string `json:"dependsOn"`
	Status    string   `json:"status"`
}

type progressJSON struct {
	Total      int `json:"total"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	InProgress int `json:"inProgress"`
	Pending    int `json:"pending"`
}

func boardList(l api.SwarmList) listJSON {
	out := listJSON{Swarms: make([]swarmJSON, 0, len(l.Swarms))}
	for _, v := range l.Swarms {
		out.Swarms = append(out.Swarms, boardSwarm(v))
	}
	return out
}

func boardSwarm(v api.SwarmView) swarmJSON {
	s := swarmJSON{Repo: v.RepoPath, Containers: []containerJSON{}, Land: boardLand(v.Land)}
	var picked map[string]bool
	s.Attempts, picked = boardAttempts(v)
	details := map[string]api.ContainerDetail{}
	for _, d := range v.Containers {
		details[d.Name] = d
	}
	if v.State == nil {
		return s
	}
	s.SwarmID, s.CreatedAt = v.State.SwarmID, v.State.CreatedAt
	for _, e := range v.State.Containers {
		d := details[e.ContainerName]
		c := containerJSON{
			Name: e.ContainerName, TaskFile: clean(e.TaskFilePath, maxText), Branch: clean(e.BranchName, maxText), Status: string(e.Status),
			Node: clean(d.Node, maxTitle), CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
			ExitCode: d.ExitCode, OOMKilled: d.OOMKilled, Finished: d.Finished,
			LastOutput: clean(d.LastOutput, maxText), Rejected: d.Rejected, EgressDenied: d.EgressDenied, GitRefused: d.GitRefused,
			Errors: []errorJSON{}, Stories: []storyJSON{},
			Progress: progressJSON(e.StoryProgress), LimitWaits: []string{}, EgressGranted: []string{},
		}
		if d.Egress != nil {
			for _, g := range d.Egress.Granted {
				c.EgressGranted = append(c.EgressGranted, clean(g.Rule+" ("+g.Scope+")", maxTitle))
			}
		}
		c.Conflicts = conflictsOf(v.Conflicts, e.ContainerName)
		if p, ok := picked[e.ContainerName]; ok {
			c.Picked = &p
		}
		for _, w := range d.LimitWaits {
			c.LimitWaits = append(c.LimitWaits, clean(w.Text, maxTitle))
		}
		prURL := e.PRURL
		if d.PRURL != nil {
			prURL = d.PRURL
		}
		if prURL != nil {
			c.PRURL = webURL(*prURL)
		}
		for _, er := range d.Errors {
			c.Errors = append(c.Errors, errorJSON{Code: clean(er.Code, maxTitle), Message: clean(er.Message, maxText)})
		}
		for _, st := range d.Stories {
			deps := make([]string, 0, len(st.DependsOn))
			for _, dep := range st.DependsOn {
				deps = append(deps, clean(dep, maxTitle))
			}
			c.Stories = append(c.Stories, storyJSON{ID: clean(st.ID, maxTitle), Title: clean(st.Title, maxTitle), DependsOn: deps, Status: st.Status})
		}
		s.Containers = append(s.Containers, c)
	}
	return s
}

// maxBadgeFiles bounds the files a conflict badge names.
const maxBadgeFiles = 5

// conflictsOf is what name's branch would conflict with (overlaps, which
// merge cleanly, get no badge).
func conflictsOf(all []api.Conflict, name string) []conflictJSON {
	out := []conflictJSON{}
	for _, k := range all {
		if k.Kind != "conflict" {
			continue
		}
		with := ""
		switch {
		case k.Onto != "" && len(k.Containers) == 1 && k.Containers[0] == name:
			with = k.Onto + " (the landing target)"
		case len(k.Containers) == 2 && k.Containers[0] == name:
			with = k.Containers[1]
		case len(k.Containers) == 2 && k.Containers[1] == name:
			with = k.Containers[0]
		default:
			continue
		}
		cj := conflictJSON{With: clean(with, maxTitle), Files: []string{}}
		for _, f := range k.Files[:min(len(k.Files), maxBadgeFiles)] {
			cj.Files = append(cj.Files, clean(f, maxTitle))
		}
		out = append(out, cj)
	}
	return out
}

func cleanText(rep api.CleanupReport) api.CleanupReport {
	for i := range rep.Kept {
		rep.Kept[i].Reason = clean(rep.Kept[i].Reason, maxText)
	}
	for i := range rep.Lost {
		rep.Lost[i].Reason = clean(rep.Lost[i].Reason, maxText)
	}
	for i := range rep.Notes {
		rep.Notes[i] = clean(rep.Notes[i], maxText)
	}
	return rep
}

// eventJSON is one state change as the page applies it.
type eventJSON struct {
	Time        time.Time `json:"time"`
	Repo        string    `json:"repo"`
	Container   string    `json:"container,omitempty"`
	Kind        string    `json:"kind"`
	Status      string    `json:"status,omitempty"`
	MessageType string    `json:"messageType,omitempty"`
	StoryID     string    `json:"storyId,omitempty"`
	StoryStatus string    `json:"storyStatus,omitempty"`
	Output      string    `json:"output,omitempty"`
	Code        string    `json:"code,omitempty"`
	// Badges are the conflict badges a conflict-detected or -cleared
	// event adds or removes, by card: both cards of a pair.
	Badges map[string]conflictJSON `json:"badges,omitempty"`
}

func boardEvent(e api.Event) eventJSON {
	ej := eventJSON{
		Time: e.Time, Repo: e.RepoPath, Container: e.ContainerName, Kind: string(e.Kind), Status: e.Status, MessageType: e.MessageType,
		StoryID: clean(e.StoryID, maxTitle), StoryStatus: e.StoryStatus, Output: clean(e.Output, maxText), Code: clean(e.Code, maxTitle),
	}
	if e.Conflict != nil {
		ej.Badges = map[string]conflictJSON{}
		for _, name := range e.Conflict.Containers {
			if b := conflictsOf([]api.Conflict{*e.Conflict}, name); len(b) == 1 {
				ej.Badges[name] = b[0]
			}
		}
	}
	return ej
}

// webURL keeps only http and https links: a javascript: or data: URL from
// a container must never become a link.
func webURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

// clean makes untrusted text safe to show in the page (as textContent, on
// one line): the CLI's terminal filter, in its form for text displays.
func clean(s string, max int) string { return termsafe.Line(s, max) }
