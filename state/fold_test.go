package state

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

var allStory = []tasks.Status{tasks.Pending, tasks.InProgress, tasks.Completed, tasks.Failed, tasks.Skipped}

// TestStoryTransitions applies every (from, to) pair of story statuses and
// checks it is accepted exactly when the table allows a report of it, leaving the state
// unchanged when not.
func TestStoryTransitions(t *testing.T) {
	for _, from := range allStory {
		for _, to := range allStory {
			allowed := tasks.CanReport(from, to)
			name := fmt.Sprintf("%s to %s is rejected", from, to)
			if allowed {
				name = fmt.Sprintf("%s to %s is applied", from, to)
			}
			t.Run(name, func(t *testing.T) {
				tr := NewTracker(taskFile(from, tasks.Pending))
				before := tr.Stories()
				err := tr.Apply(progress(1, "US-001", to))
				var rej *RejectedError
				switch {
				case allowed && err != nil:
					t.Fatalf("Apply: %v", err)
				case !allowed && !errors.As(err, &rej):
					t.Fatalf("Apply = %v, want *RejectedError", err)
				}
				want := from
				if allowed {
					want = to
				}
				if got := tr.Stories()["US-001"]; got != want {
					t.Fatalf("story = %s, want %s", got, want)
				}
				if !allowed && !maps.Equal(before, tr.Stories()) {
					t.Fatalf("rejected message changed the stories: %v -> %v", before, tr.Stories())
				}
				if !allowed && tr.Status() != StatusPending {
					t.Fatalf("rejected message changed the container status to %s", tr.Status())
				}
			})
		}
	}
}

// foldWant is what a tracker shows after a case's messages.
type foldWant struct {
	status   ContainerStatus
	progress Progress
	pr       *string
	rejected bool   // the last message is rejected
	code     string // with this code
}

// foldCase is one case of TestFold: a tracker on file, fed msgs.
type foldCase struct {
	name string
	file *tasks.File
	msgs []acpmsg.Message
	want foldWant
}

func TestFold(t *testing.T) {
	pr := ptr("https://github.com/org/repo/pull/42")
	other := ptr("https://github.com/org/repo/pull/43")
	cases := append(foldStoryCases(), foldEndCases(pr, other)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkFold(t, tc) })
	}
}

// foldStoryCases are TestFold's cases of task requests and story reports.
func foldStoryCases() []foldCase {
	return []foldCase{
		{"fresh tracker is pending with the file's stories pending", pendingFile(3), nil,
			foldWant{status: StatusPending, progress: Progress{Total: 3, Pending: 3}}},
		{"stories completed or skipped in the file start that way",
			taskFile(tasks.Completed, tasks.Skipped, tasks.Pending, tasks.Failed), nil,
			foldWant{status: StatusPending, progress: Progress{Total: 4, Completed: 1, Pending: 1, Failed: 1}}},
		{"task-request moves pending to running", pendingFile(2), []acpmsg.Message{taskRequest(1)},
			foldWant{status: StatusRunning, progress: Progress{Total: 2, Pending: 2}}},
		{"progress-update moves pending to running and counts in progress", pendingFile(2),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress)},
			foldWant{status: StatusRunning, progress: Progress{Total: 2, InProgress: 1, Pending: 1}}},
		{"story completion counts completed", pendingFile(2),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed)},
			foldWant{status: StatusRunning, progress: Progress{Total: 2, Completed: 1, Pending: 1}}},
		{"story failure counts failed and retry counts in progress again", pendingFile(1),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Failed), progress(3, "US-001", tasks.InProgress)},
			foldWant{status: StatusRunning, progress: Progress{Total: 1, InProgress: 1}}},
		{"skipped story counts in none of the four", pendingFile(2),
			[]acpmsg.Message{progress(1, "US-002", tasks.Skipped)},
			foldWant{status: StatusRunning, progress: Progress{Total: 2, Pending: 1}}},
		{"completed to in_progress is rejected", pendingFile(1),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed), progress(3, "US-001", tasks.InProgress)},
			foldWant{status: StatusRunning, progress: Progress{Total: 1, Completed: 1}, rejected: true}},
		{"pending to completed is rejected", pendingFile(1),
			[]acpmsg.Message{progress(1, "US-001", tasks.Completed)},
			foldWant{status: StatusPending, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"story not in the task file is rejected", pendingFile(1),
			[]acpmsg.Message{progress(1, "US-009", tasks.InProgress)},
			foldWant{status: StatusPending, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"tracker without a task file learns stories", nil,
			[]acpmsg.Message{progress(1, "US-009", tasks.InProgress), progress(2, "US-004", tasks.Skipped)},
			foldWant{status: StatusRunning, progress: Progress{Total: 2, InProgress: 1}}},
	}
}

// foldEndCases are TestFold's cases of completions, errors and what follows them;
// pr and other are two pull request addresses.
func foldEndCases(pr, other *string) []foldCase {
	return []foldCase{
		{"completion completed sets status and prUrl", pendingFile(1),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed), completion(3, "completed", pr)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}, pr: pr}},
		{"completion completed with a story pending is rejected with a code", pendingFile(4), []acpmsg.Message{completion(1, "completed", nil)},
			foldWant{status: StatusPending, progress: Progress{Total: 4, Pending: 4}, rejected: true, code: CodeCompletionContradicts}},
		{"completion completed with a story in progress is rejected with a code", pendingFile(2),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed), progress(3, "US-002", tasks.InProgress), completion(4, "completed", nil)},
			foldWant{status: StatusRunning, progress: Progress{Total: 2, Completed: 1, InProgress: 1}, rejected: true, code: CodeCompletionContradicts}},
		{"completion completed after stories failed or skipped is believed", pendingFile(3),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Failed), progress(3, "US-002", tasks.Skipped),
				progress(4, "US-003", tasks.Skipped), completion(5, "completed", nil)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 3, Failed: 1}}},
		{"completion failed sets failed", pendingFile(1), []acpmsg.Message{completion(1, "failed", nil)},
			foldWant{status: StatusFailed, progress: Progress{Total: 1, Pending: 1}}},
		{"completion stopped sets stopped", pendingFile(1), []acpmsg.Message{taskRequest(1), completion(2, "stopped", nil)},
			foldWant{status: StatusStopped, progress: Progress{Total: 1, Pending: 1}}},
		{"completion with an unknown status is rejected", pendingFile(1), []acpmsg.Message{completion(1, "done", nil)},
			foldWant{status: StatusPending, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"error sets failed", pendingFile(1),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), errorMsg(2, acpmsg.CodeContainerOOM)},
			foldWant{status: StatusFailed, progress: Progress{Total: 1, InProgress: 1}}},
		{"duplicate completion changes nothing", taskFile(tasks.Completed),
			[]acpmsg.Message{completion(1, "completed", pr), completion(1, "completed", pr)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}, pr: pr}},
		{"duplicate error changes nothing", pendingFile(1),
			[]acpmsg.Message{errorMsg(1, "AGENT_CRASH"), errorMsg(1, "AGENT_CRASH")},
			foldWant{status: StatusFailed, progress: Progress{Total: 1, Pending: 1}}},
		{"second, different completion after completed is rejected", taskFile(tasks.Completed),
			[]acpmsg.Message{completion(1, "completed", pr), completion(2, "failed", nil)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}, pr: pr, rejected: true}},
		{"error after completion is rejected", pendingFile(1),
			[]acpmsg.Message{completion(1, "stopped", nil), errorMsg(2, "AGENT_CRASH")},
			foldWant{status: StatusStopped, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"completion after error is rejected", pendingFile(1),
			[]acpmsg.Message{errorMsg(1, "CONTAINER_OOM"), completion(2, "completed", pr)},
			foldWant{status: StatusFailed, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"progress after a terminal status is rejected", pendingFile(1),
			[]acpmsg.Message{completion(1, "failed", nil), progress(2, "US-001", tasks.InProgress)},
			foldWant{status: StatusFailed, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"task-request after a terminal status is rejected", taskFile(tasks.Completed),
			[]acpmsg.Message{completion(1, "completed", nil), taskRequest(2)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}, rejected: true}},
		{"a later completion of the same status adds the prUrl the first lacked", taskFile(tasks.Completed),
			[]acpmsg.Message{completion(1, "completed", nil), completion(2, "completed", pr)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}, pr: pr}},
		{"the prUrl amendment applied twice changes nothing the second time", taskFile(tasks.Completed),
			[]acpmsg.Message{completion(1, "completed", nil), completion(2, "completed", pr), completion(2, "completed", pr)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}, pr: pr}},
		{"a prUrl never replaces another", taskFile(tasks.Completed),
			[]acpmsg.Message{completion(1, "completed", pr), completion(2, "completed", other)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}, pr: pr, rejected: true}},
		{"a prUrl with another status is rejected", pendingFile(1),
			[]acpmsg.Message{completion(1, "stopped", nil), completion(2, "completed", pr)},
			foldWant{status: StatusStopped, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"a prUrl after an error is rejected", pendingFile(1),
			[]acpmsg.Message{errorMsg(1, "AGENT_CRASH"), completion(2, "failed", pr)},
			foldWant{status: StatusFailed, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"the daemon's publish note after completed changes nothing", taskFile(tasks.Completed),
			[]acpmsg.Message{completion(1, "completed", nil), errorMsg(2, acpmsg.CodePublishFailed)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}}},
		{"the daemon's publish note after failed changes nothing", pendingFile(1),
			[]acpmsg.Message{errorMsg(1, acpmsg.CodeGitPushFailed), errorMsg(2, acpmsg.CodePublishFailed)},
			foldWant{status: StatusFailed, progress: Progress{Total: 1, Pending: 1}}},
		{"a publish note before the container finished is rejected", pendingFile(1),
			[]acpmsg.Message{taskRequest(1), errorMsg(2, acpmsg.CodePublishFailed)},
			foldWant{status: StatusRunning, progress: Progress{Total: 1, Pending: 1}, rejected: true}},
		{"replayed story report after a terminal status changes nothing", pendingFile(1),
			[]acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed),
				completion(3, "completed", nil), progress(2, "US-001", tasks.Completed)},
			foldWant{status: StatusCompleted, progress: Progress{Total: 1, Completed: 1}}},
	}
}

// checkFold feeds tc's messages to a tracker and checks every one but the
// last is accepted, and the last one and the tracker's state as tc wants.
func checkFold(t *testing.T, tc foldCase) {
	tr := NewTracker(tc.file)
	var last error
	for i, m := range tc.msgs {
		last = tr.Apply(m)
		if last != nil && i < len(tc.msgs)-1 {
			t.Fatalf("message %d: %v", i, last)
		}
	}
	var rej *RejectedError
	if tc.want.rejected != errors.As(last, &rej) {
		t.Fatalf("last Apply = %v, want rejected=%v", last, tc.want.rejected)
	}
	if rej != nil && rej.Code != tc.want.code {
		t.Fatalf("rejection code %q, want %q (%v)", rej.Code, tc.want.code, rej)
	}
	if last != nil && !tc.want.rejected {
		t.Fatalf("last Apply: %v", last)
	}
	if tr.Status() != tc.want.status {
		t.Errorf("status = %s, want %s", tr.Status(), tc.want.status)
	}
	if tr.Progress() != tc.want.progress {
		t.Errorf("progress = %+v, want %+v", tr.Progress(), tc.want.progress)
	}
	if !eqPtr(tr.PRURL(), tc.want.pr) {
		t.Errorf("prUrl = %v, want %v", tr.PRURL(), tc.want.pr)
	}
	var c Container
	tr.CopyTo(&c)
	if c.Status != tr.Status() || c.StoryProgress != tr.Progress() || !eqPtr(c.PRURL, tr.PRURL()) {
		t.Errorf("CopyTo wrote %+v", c)
	}
}

// randomStream is a valid stream for n stories: each story walks the
// transition table (possibly failing and retrying), stories interleave, and
// the stream ends with a completion or an error.
func randomStream(rng *rand.Rand, n int) []acpmsg.Message {
	type walk struct {
		id    string
		steps []tasks.Status
		last  tasks.Status
	}
	walks := make([]walk, n)
	for i := range walks {
		w := walk{id: storyID(i)}
		if rng.IntN(6) == 0 {
			w.steps = []tasks.Status{tasks.Skipped}
		} else {
			w.steps = []tasks.Status{tasks.InProgress}
			for rng.IntN(3) == 0 {
				w.steps = append(w.steps, tasks.Failed, tasks.InProgress)
			}
			switch rng.IntN(4) {
			case 0:
				w.steps = append(w.steps, tasks.Failed)
			case 1: // left in progress
			default:
				w.steps = append(w.steps, tasks.Completed)
			}
		}
		walks[i] = w
	}
	var out []acpmsg.Message
	clock := 0
	out = append(out, taskRequest(clock))
	for {
		var live []int
		for i, w := range walks {
			if len(w.steps) > 0 {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			break
		}
		i := live[rng.IntN(len(live))]
		clock++
		out = append(out, progress(clock, walks[i].id, walks[i].steps[0]))
		walks[i].last = walks[i].steps[0]
		walks[i].steps = walks[i].steps[1:]
	}
	clock++
	finished := true
	for _, w := range walks {
		finished = finished && len(w.last) > 0 && w.last != tasks.InProgress
	}
	switch rng.IntN(4) {
	case 0:
		out = append(out, errorMsg(clock, acpmsg.CodeAgentCrash))
	case 1:
		out = append(out, completion(clock, "failed", nil))
	case 2:
		out = append(out, completion(clock, "stopped", nil))
	default:
		if !finished { // a completed claim with stories open is rejected
			out = append(out, completion(clock, "failed", nil))
			break
		}
		out = append(out, completion(clock, "completed", ptr(fmt.Sprintf("https://example.com/pull/%d", clock))))
	}
	return out
}

// noisy mixes duplicates (repeated at once), replays of the prefix so far
// (as a restarted reader would send) and a full replay at the end.
func noisy(rng *rand.Rand, clean []acpmsg.Message) []acpmsg.Message {
	var out []acpmsg.Message
	for i, m := range clean {
		out = append(out, m)
		for rng.IntN(4) == 0 {
			out = append(out, m)
		}
		if rng.IntN(10) == 0 {
			out = append(out, clean[:i+1]...)
		}
	}
	for range rng.IntN(3) {
		out = append(out, clean...)
	}
	return out
}

type foldResult struct {
	status   ContainerStatus
	pr       *string
	progress Progress
	stories  map[string]tasks.Status
}

func fold(tf *tasks.File, msgs []acpmsg.Message) foldResult {
	tr := NewTracker(tf)
	for _, m := range msgs {
		_ = tr.Apply(m)
	}
	return foldResult{tr.Status(), tr.PRURL(), tr.Progress(), tr.Stories()}
}

func TestFoldPropertyDuplicatesAndReplaysGiveTheCleanState(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 2026))
	for iter := range 400 {
		n := 1 + rng.IntN(8)
		tf := pendingFile(n)
		clean := randomStream(rng, n)
		want := fold(tf, clean)
		// every message of the clean stream is accepted
		tr := NewTracker(tf)
		for i, m := range clean {
			if err := tr.Apply(m); err != nil {
				t.Fatalf("iter %d: clean message %d rejected: %v", iter, i, err)
			}
		}
		got := fold(tf, noisy(rng, clean))
		if got.status != want.status || !eqPtr(got.pr, want.pr) || got.progress != want.progress || !maps.Equal(got.stories, want.stories) {
			t.Fatalf("iter %d: noisy stream gave %+v, clean stream %+v", iter, got, want)
		}
	}
}

func FuzzFoldNeverLeavesTerminal(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		tr := NewTracker(pendingFile(3))
		terminal := ContainerStatus("")
		for i, op := range ops {
			var m acpmsg.Message
			switch op % 4 {
			case 0:
				m = progress(i, storyID(int(op/4)%4), allStory[int(op/16)%5])
			case 1:
				m = completion(i, []string{"completed", "failed", "stopped"}[int(op/4)%3], nil)
			case 2:
				m = errorMsg(i, "AGENT_CRASH")
			default:
				m = taskRequest(i)
			}
			_ = tr.Apply(m)
			if terminal != "" && tr.Status() != terminal {
				t.Fatalf("left terminal status %s for %s", terminal, tr.Status())
			}
			if tr.Status().Terminal() {
				terminal = tr.Status()
			}
			p := tr.Progress()
			if p.Completed+p.Failed+p.InProgress+p.Pending > p.Total {
				t.Fatalf("counters exceed total: %+v", p)
			}
		}
	})
}
