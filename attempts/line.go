package attempts

import (
	"fmt"

	"github.com/aimi-tools/swarm/state"
)

// Line is a task file's attempts in one line, as status shows it:
// "feat/x: attempt 2 of 3 picked (verified; score 0.91 vs 0.85; 1,204 vs
// 1,877 lines)".
func Line(set *state.AttemptSet) string {
	n := len(set.Attempts)
	switch p := set.Pick; {
	case p == nil:
		return fmt.Sprintf("%s: %d attempts, none picked yet", set.BranchName, n)
	case p.ContainerName == "":
		return fmt.Sprintf("%s: no attempt of %d picked (%s)", set.BranchName, n, p.Reason)
	case p.By == state.PickByHand:
		return fmt.Sprintf("%s: attempt %d of %d picked by hand (%s)", set.BranchName, p.Attempt, n, p.Reason)
	default:
		return fmt.Sprintf("%s: attempt %d of %d picked (%s)", set.BranchName, p.Attempt, n, p.Reason)
	}
}
