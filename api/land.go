package api

import "time"

// RouteLand lands a swarm's completed branches (LandRequest, LandReport).
const RouteLand = "POST /v1/swarms/land"

// EventLandProgress says a swarm's land record changed (Status
// "running" or "done"): a branch's outcome, a fix-up or check started.
const EventLandProgress EventKind = "land-progress"

// LandRequest asks to land the swarm of RepoPath.
type LandRequest struct {
	RepoPath string `json:"repoPath"`
	// Onto is the branch to land on; "": the branch the swarm started
	// from (its repository's checked-out branch then).
	Onto string `json:"onto,omitempty"`
	// Order names containers in the order to land them; none: the order
	// the containers completed. Completed containers it leaves out come
	// after it, in that order too.
	Order []string `json:"order,omitempty"`
}

// LandReport is what a land did.
type LandReport struct {
	RepoPath string `json:"repoPath"`
	// Branch is the integration branch (aimi/land/<swarm id, first 8>), in
	// the checkout; Onto is the branch it started from, OntoCommit its
	// commit then, and Tip the integration branch's commit at the end.
	Branch     string `json:"branch"`
	Onto       string `json:"onto"`
	OntoCommit string `json:"ontoCommit"`
	Tip        string `json:"tip"`
	// Results has one entry per container, in landing order.
	Results []LandResult `json:"results"`
	// Skipped are the containers not landed because they did not complete.
	Skipped []Kept `json:"skipped"`
	// Take is the one command that moves Onto to the landed work (a
	// fast-forward), "" when nothing landed.
	Take string `json:"take,omitempty"`
	// Origin is where the integration branch was pushed (remote git
	// mode: origin's URL), and PRURL its pull request, when one was
	// opened; without one Take is the page or command that opens it.
	Origin string `json:"origin,omitempty"`
	PRURL  string `json:"prUrl,omitempty"`
	// Running is true while the land goes on (the record the daemon keeps
	// beside the swarm's journals says so after a crash, too); Updated is
	// when the record last changed.
	Running bool      `json:"running,omitempty"`
	Updated time.Time `json:"updated"`
	// Cut says the land stopped in the middle (the daemon was killed or
	// stopped, or the command interrupted): its entries are as they were
	// then, and `aimi swarm land` again goes on where it stopped.
	Cut bool `json:"cut,omitempty"`
	// Cost is the land's own model cost: every check and fix-up it ran
	// (each result's RunsCost), apart from the branches' work.
	Cost float64 `json:"cost"`
}

// LandResult is one container's outcome: "landed", "fixed" or "held"
// (Reason says why; a held branch keeps its commits).
type LandResult struct {
	Container string   `json:"container"`
	TaskFile  string   `json:"taskFile"`
	Branch    string   `json:"branch"`
	Outcome   string   `json:"outcome"`
	Reason    string   `json:"reason,omitempty"`
	Tip       string   `json:"tip"`
	Merge     string   `json:"merge,omitempty"`
	Files     []string `json:"files,omitempty"`
	Verify    string   `json:"verify,omitempty"`
	// Fixup names the fix-up container of a conflict or failed check.
	Fixup string `json:"fixup,omitempty"`
	// Cost is the container's model cost so far, the figure `aimi swarm
	// usage` prints for it; RunsCost is its merge's checks' and fix-ups'
	// (counted as the land's). At the configured prices, plus what agents
	// reported in USD.
	Cost     float64 `json:"cost"`
	RunsCost float64 `json:"runsCost"`
}

// LandFixing and LandVerifying are the outcomes of a branch whose fix-up,
// or the check of whose merge, runs now.
const (
	LandFixing    = "fixing"
	LandVerifying = "verifying"
)
