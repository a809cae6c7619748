package orchestrator

import (
	"context"
	"fmt"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/tasks"
)

// plannedTask is one validated task file of a api.StartRequest.
type plannedTask struct {
	path string
	tf   *tasks.File
	// attempt is the run's number when the task file runs several times
	// (0: once), variant its agent.variants entry.
	attempt int
	variant string
}

// Bounds of a TaskFileError: the request names any number of files, each
// answer quotes what the file holds, and the whole answer must stay well
// under what a client reads of an error (1 MiB).
const (
	maxProblemPath    = 256      // bytes of a path quoted
	maxProblemReason  = 32 << 10 // bytes of one file's reason
	maxProblemsReason = 96 << 10 // bytes of every reason together
)

// problemList collects TaskFileProblems within those bounds; once they are
// reached, the rest is counted in one last entry.
type problemList struct {
	list    []api.TaskFileProblem
	bytes   int
	omitted int
}

func (l *problemList) add(path, reason string) {
	reason = cutText(oneLine(reason), maxProblemReason)
	if l.bytes+len(reason) > maxProblemsReason {
		l.omitted++
		return
	}
	l.bytes += len(reason)
	l.list = append(l.list, api.TaskFileProblem{Path: cutText(path, maxProblemPath), Reason: reason})
}

func (l *problemList) err() error {
	if len(l.list) == 0 && l.omitted == 0 {
		return nil
	}
	list := l.list
	if l.omitted > 0 {
		list = append(list, api.TaskFileProblem{Path: "...", Reason: fmt.Sprintf(
			"%d more task files have problems that are not listed; fix those above and start again to see them", l.omitted)})
	}
	return &api.TaskFileError{Problems: list}
}

// cutText shortens s to at most max bytes on a rune boundary.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	end := max - len("...")
	for end > 0 && s[end]&0xC0 == 0x80 {
		end--
	}
	return s[:end] + "..."
}

// validateTasks applies every check before any engine call; all problems are
// reported together.
// existing maps the task files of the active swarm (when appending) to
// their branches. No two task files, new or existing, may share a branch.
// Each file is read as the container will run it (loadAsRun): the copy
// committed where the container checks it out.
func validateTasks(ctx context.Context, repo string, files []string, existing map[string]string, local bool) ([]plannedTask, error) {
	var probs problemList
	var out []plannedTask
	seen := map[string]bool{}
	branches := map[string]string{} // branch -> the task file that has it
	for p, b := range existing {
		branches[b] = p
	}
	loaded := loadAllAsRun(ctx, repo, files, local)
	for i, p := range files {
		if err := checkTaskPath(p); err != nil {
			probs.add(p, err.Error())
			continue
		}
		if seen[p] {
			probs.add(p, "named twice")
			continue
		}
		seen[p] = true
		if _, ok := existing[p]; ok {
			probs.add(p, "already in the active swarm (use resume to rerun it)")
			continue
		}
		tf, err := loaded[i].tf, loaded[i].err
		if err != nil {
			probs.add(p, oneLine(err.Error()))
			continue
		}
		b := tf.Metadata.BranchName
		if other, taken := branches[b]; taken {
			pr := tasks.BranchTaken(b, p, other)
			probs.add(p, pr.Error+" "+pr.Fix)
			continue
		}
		branches[b] = p
		out = append(out, plannedTask{path: p, tf: tf})
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	return out, nil
}
