package api

// Conflict is what the conflict radar foresees of two branches of a
// swarm, or of one branch against the landing target (Onto names it and
// Containers holds the one container), while their agents still work.
type Conflict struct {
	Containers []string `json:"containers"`
	Onto       string   `json:"onto,omitempty"`
	// Files: for a conflict, the files the merge would stop on; for an
	// overlap, the files both sides changed (their merge is clean).
	Files []string `json:"files"`
	// Kind is "conflict" or "overlap".
	Kind string `json:"kind"`
}

// Events of the conflict radar (Event.Conflict says which pair): a pair
// that would conflict now, and one that no longer would.
const (
	EventConflictDetected EventKind = "conflict-detected"
	EventConflictCleared  EventKind = "conflict-cleared"
)
