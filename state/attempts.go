package state

import (
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// The attempts section: an additive top-level member "attempts" of
// swarm-state.json, one entry per task file the daemon runs several times
// (best of N, docs/attempts.md). The schema's other members are as they
// were; the shell tools ignore it. The daemon writes an entry when it
// creates the attempts and again, in one atomic write, when it picks: an
// entry with a pick is a decision taken, one without is none.

// AttemptSet is one task file's attempts and their pick.
type AttemptSet struct {
	TaskFilePath string `json:"taskFilePath"`
	// BranchName is the task file's branch: the picked attempt's commits
	// are published under it.
	BranchName string `json:"branchName"`
	// Stop is the set's swarm.attempts_stop ("all" or "first-verified").
	Stop     string    `json:"stop,omitempty"`
	Attempts []Attempt `json:"attempts"`
	// Pick is the decision, nil until every attempt ended.
	Pick *AttemptPick `json:"pick,omitempty"`
}

// Attempt is one attempt of a task file: a container of the swarm.
type Attempt struct {
	Attempt       int    `json:"attempt"` // 1-based
	ContainerName string `json:"containerName"`
	BranchName    string `json:"branchName"`
	Variant       string `json:"variant,omitempty"`
	// KeptRef names its commits in the checkout (refs/aimi/attempts/...),
	// Tip its last commit there; empty until it ended (or when it pushed
	// nothing).
	KeptRef string `json:"keptRef,omitempty"`
	Tip     string `json:"tip,omitempty"`
	// What the pick knew of it: every story completed and the verify
	// command passed (Qualified), the score command's number, the lines
	// its branch changed and what its model calls cost.
	Qualified bool     `json:"qualified,omitempty"`
	Score     *float64 `json:"score,omitempty"`
	Lines     *int     `json:"lines,omitempty"`
	Cost      float64  `json:"cost,omitempty"`
	// StoppedEarly: swarm.attempts_stop first-verified stopped it.
	StoppedEarly bool `json:"stoppedEarly,omitempty"`
}

// AttemptPick is a set's decision. ContainerName "" (Attempt 0) is the
// decision that no attempt qualified.
type AttemptPick struct {
	Attempt       int       `json:"attempt"`
	ContainerName string    `json:"containerName"`
	Tip           string    `json:"tip,omitempty"`
	Reason        string    `json:"reason"`
	By            string    `json:"by"` // PickByDaemon or PickByHand
	At            time.Time `json:"at"`
	// Previous is the attempt a pick by hand replaced (0: none), and
	// PreviousTip its tip: the task file's branch is moved off it.
	Previous    int    `json:"previous,omitempty"`
	PreviousTip string `json:"previousTip,omitempty"`
}

// Who picked.
const (
	PickByDaemon = "daemon"
	PickByHand   = "hand"
)

// AttemptSet returns the set of the task file at path, or nil.
func (s *Swarm) AttemptSet(path string) *AttemptSet {
	for _, a := range s.Attempts {
		if a.TaskFilePath == path {
			return a
		}
	}
	return nil
}

// PutAttemptSet adds set, or replaces the one of its task file.
func (s *Swarm) PutAttemptSet(set *AttemptSet) {
	for i, a := range s.Attempts {
		if a.TaskFilePath == set.TaskFilePath {
			s.Attempts[i] = set
			return
		}
	}
	s.Attempts = append(s.Attempts, set)
}

// Attempt returns the attempt of container name, or nil.
func (a *AttemptSet) Attempt(name string) *Attempt {
	for i := range a.Attempts {
		if a.Attempts[i].ContainerName == name {
			return &a.Attempts[i]
		}
	}
	return nil
}

// Clone returns a deep copy.
func (a *AttemptSet) Clone() *AttemptSet {
	if a == nil {
		return nil
	}
	out := *a
	out.Attempts = slices.Clone(a.Attempts)
	for i, at := range out.Attempts {
		if at.Score != nil {
			v := *at.Score
			out.Attempts[i].Score = &v
		}
		if at.Lines != nil {
			v := *at.Lines
			out.Attempts[i].Lines = &v
		}
	}
	if a.Pick != nil {
		p := *a.Pick
		out.Pick = &p
	}
	return &out
}

// maxAttemptSets bounds what a read takes of the section: a file edited
// by hand must not make the daemon hold without end.
const maxAttemptSets = 4096

// decodeAttempts reads the attempts member (absent or null: none).
func decodeAttempts(m map[string]json.RawMessage, out *Swarm) error {
	raw, ok := m["attempts"]
	if !ok || isNull(raw) {
		return nil
	}
	var sets []*AttemptSet
	if err := json.Unmarshal(raw, &sets); err != nil {
		return at("attempts", errors.New("is not a list of attempt sets"))
	}
	if len(sets) > maxAttemptSets {
		return at("attempts", errors.New("has too many entries"))
	}
	for i, s := range sets {
		if s == nil {
			return atIndex("attempts", i, errors.New("is null"))
		}
	}
	out.Attempts = sets
	return nil
}
