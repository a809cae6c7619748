package contract

import (
	"fmt"
	"regexp"
)

// NoMarkerCriterion is the acceptance criterion of a land's fix-up story
// for one conflicted file. The daemon writes it; the demo agent reads it
// (NoMarkerPattern) to resolve the file instead of writing one.
func NoMarkerCriterion(file string) string {
	return fmt.Sprintf("No conflict marker is left in %s, and both sides' changes are kept", file)
}

// NoMarkerPattern finds NoMarkerCriterion's file in a prompt.
var NoMarkerPattern = regexp.MustCompile(`No conflict marker is left in ([A-Za-z0-9_.][A-Za-z0-9_./-]*), and both sides`)

// VerifyOnlyNotes marks a story the runner does not hand to an agent: it
// runs the verify command on the workspace as it is, and the story
// completes when it passes (a land's check of a merged tree).
const VerifyOnlyNotes = "aimi: verify only; no agent turn"
