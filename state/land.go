package state

import (
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// The land section: an additive top-level member "land" of
// swarm-state.json, the record of the swarm's last land (docs/land.md):
// its target, and each branch's outcome in landing order. The schema's
// other members are as they were; the shell tools ignore it. The daemon
// writes it, under the file's lock and atomically like every save,
// whenever the land's record changes; the Recorder's saves keep what the
// file holds there.

// Land is the record of a swarm's last land.
type Land struct {
	// Branch is the integration branch (aimi/land/<swarm id, first 8>);
	// Onto the branch it started from (the land's target), OntoCommit
	// its commit then, Tip the integration branch's commit at the end.
	Branch     string `json:"branch"`
	Onto       string `json:"onto"`
	OntoCommit string `json:"ontoCommit,omitempty"`
	Tip        string `json:"tip,omitempty"`
	// Results has one entry per branch, in landing order.
	Results []LandResult `json:"results"`
	// Skipped are the containers not landed, with why.
	Skipped []LandSkipped `json:"skipped,omitempty"`
	// Take is the command that moves Onto to the landed work; Origin and
	// PRURL where it was pushed and its pull request (remote git mode).
	Take   string `json:"take,omitempty"`
	Origin string `json:"origin,omitempty"`
	PRURL  string `json:"prUrl,omitempty"`
	// Running: the land went on when this was written (after a crash, a
	// reader takes it as cut short); Cut: it stopped in the middle.
	Running bool      `json:"running,omitempty"`
	Cut     bool      `json:"cut,omitempty"`
	Updated time.Time `json:"updated"`
}

// LandResult is one branch's outcome: "landed", "fixed" or "held" (Reason
// says why), or "fixing"/"verifying" while its fix-up or check runs.
type LandResult struct {
	Container string `json:"container"`
	TaskFile  string `json:"taskFile"`
	Branch    string `json:"branch"`
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason,omitempty"`
	// Tip is the branch's commit landed; Merge the merge commit on the
	// integration branch; Files a held branch's conflicting files; Verify
	// the verify command's result on the merge ("passed", "failed").
	Tip    string   `json:"tip"`
	Merge  string   `json:"merge,omitempty"`
	Files  []string `json:"files,omitempty"`
	Verify string   `json:"verify,omitempty"`
	// Fixup names the fix-up container of a conflict or failed check.
	Fixup string `json:"fixup,omitempty"`
}

// LandSkipped is a container a land left out, and why.
type LandSkipped struct {
	Name    string   `json:"name"`
	Reason  string   `json:"reason"`
	Commits []string `json:"commits,omitempty"`
}

// Clone returns a deep copy.
func (l *Land) Clone() *Land {
	if l == nil {
		return nil
	}
	out := *l
	out.Results = slices.Clone(l.Results)
	for i := range out.Results {
		out.Results[i].Files = slices.Clone(l.Results[i].Files)
	}
	out.Skipped = slices.Clone(l.Skipped)
	for i := range out.Skipped {
		out.Skipped[i].Commits = slices.Clone(l.Skipped[i].Commits)
	}
	return &out
}

// maxLandEntries bounds what a read takes of the section's lists: a file
// edited by hand must not make the daemon hold without end.
const maxLandEntries = 1 << 16

// decodeLand reads the land member (absent or null: none).
func decodeLand(m map[string]json.RawMessage, out *Swarm) error {
	raw, ok := m["land"]
	if !ok || isNull(raw) {
		return nil
	}
	var l Land
	if err := json.Unmarshal(raw, &l); err != nil {
		return at("land", errors.New("is not a land record"))
	}
	if len(l.Results) > maxLandEntries || len(l.Skipped) > maxLandEntries {
		return at("land", errors.New("has too many entries"))
	}
	if l.Results == nil {
		l.Results = []LandResult{}
	}
	out.Land = &l
	return nil
}
