package state

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// RejectedError is a valid message the fold refused: it breaks the story
// transition table, names an unknown story, arrives after the container
// reached a terminal status, or is a completion that contradicts the story
// progress. The state is unchanged.
type RejectedError struct {
	Reason string
	// Code is set for a rejection that ends the container: the daemon
	// records an error with this code, so the container is failed.
	Code string
}

func (e *RejectedError) Error() string { return "message rejected: " + e.Reason }

// CodeCompletionContradicts is the error code of a container that reported
// completion completed while stories were still pending or in progress: the
// spec's completed means every story finished (completed, failed or
// skipped), and a claim the story progress does not back is not believed.
const CodeCompletionContradicts = "COMPLETION_CONTRADICTS_PROGRESS"

func rejectf(format string, args ...any) error {
	return &RejectedError{Reason: fmt.Sprintf(format, args...)}
}

// Tracker folds one container's message stream. It is not safe for
// concurrent use; the Recorder serialises calls.
type Tracker struct {
	order   []string // story ids in task-file order
	stories map[string]tasks.Status
	open    bool // true when built without a task file: any story id is accepted
	status  ContainerStatus
	prURL   *string
	final   *acpmsg.Message // the message that made the status terminal
}

// NewTracker starts a container's fold from its task file: every story
// begins with the status the file gives it (so stories already completed or
// skipped stay so), except the skipped stories the run reopens
// (tasks.File.SkippedBehindFailure: it retries the failed dependency), which
// begin pending, as in the runner's own copy. With a nil file the tracker
// learns story ids from the messages, each starting pending.
func NewTracker(tf *tasks.File) *Tracker {
	t := &Tracker{stories: map[string]tasks.Status{}, status: StatusPending}
	if tf == nil {
		t.open = true
		return t
	}
	reopened := map[string]bool{}
	for _, id := range tf.SkippedBehindFailure(nil) {
		reopened[id] = true
	}
	for _, s := range tf.UserStories {
		if _, dup := t.stories[s.ID]; dup {
			continue
		}
		st := s.Status
		if st == "" || reopened[s.ID] {
			st = tasks.Pending
		}
		t.order = append(t.order, s.ID)
		t.stories[s.ID] = st
	}
	return t
}

// Apply folds one validated message. It returns a *RejectedError, leaving
// the state unchanged, for a message the fold refuses; applying a message
// twice changes nothing the second time.
func (t *Tracker) Apply(m acpmsg.Message) error {
	_, err := t.apply(m)
	return err
}

// apply is Apply that also reports whether the state changed.
func (t *Tracker) apply(m acpmsg.Message) (changed bool, err error) {
	if t.status.Terminal() {
		return t.applyAfterEnd(m)
	}
	switch p := m.Payload.(type) {
	case *acpmsg.TaskRequest:
		return t.start(), nil
	case *acpmsg.ProgressUpdate:
		cur, known := t.stories[p.StoryID]
		if !known {
			if !t.open {
				return false, rejectf("story %s is not in the task file", p.StoryID)
			}
			cur = tasks.Pending
		}
		to := tasks.Status(p.Status)
		if !tasks.CanReport(cur, to) {
			return false, rejectf("story %s cannot go from %s to %s", p.StoryID, cur, to)
		}
		changed = t.start()
		if !known {
			t.order = append(t.order, p.StoryID)
			changed = true
		}
		if cur != to || !known {
			t.stories[p.StoryID] = to
			changed = true
		}
		return changed, nil
	case *acpmsg.Completion:
		return t.complete(p, m)
	case *acpmsg.ErrorPayload:
		if IsPublishNote(m) {
			return false, rejectf("%s before the container finished: there is nothing to publish yet", p.Code)
		}
		t.status = StatusFailed
		t.final = &m
		return true, nil
	case nil:
		return false, rejectf("%s message has no payload", m.Type)
	default:
		return false, rejectf("unknown payload %T", m.Payload)
	}
}

// applyAfterEnd takes a message after the container's final status: only
// an amendment of it (a pull request's URL, unreceived work) or a harmless
// repeat.
func (t *Tracker) applyAfterEnd(m acpmsg.Message) (bool, error) {
	if t.final != nil && sameMessage(*t.final, m) {
		return false, nil
	}
	if u, ok := t.prAmendment(m); ok {
		t.prURL = &u
		t.final = &m
		return true, nil
	}
	if t.unreceivedAmendment(m) {
		t.status = StatusFailed
		t.final = &m
		return true, nil
	}
	if IsPublishNote(m) {
		return false, nil
	}
	if p, ok := m.Payload.(*acpmsg.ProgressUpdate); ok && t.stories[p.StoryID] == tasks.Status(p.Status) {
		// A replayed story report that changes nothing is harmless.
		return false, nil
	}
	return false, rejectf("%s after the container is already %s", m.Type, t.status)
}

// complete takes the completion: the final status, unless it claims
// completed while stories are not finished.
func (t *Tracker) complete(p *acpmsg.Completion, m acpmsg.Message) (bool, error) {
	var st ContainerStatus
	switch p.Status {
	case acpmsg.CompletionCompleted:
		if open := t.unfinished(); len(open) > 0 {
			return false, &RejectedError{Code: CodeCompletionContradicts, Reason: fmt.Sprintf(
				"%s: completion completed while %d of %d stories are not finished (%s)",
				CodeCompletionContradicts, len(open), len(t.stories), listStories(open))}
		}
		st = StatusCompleted
	case acpmsg.CompletionFailed:
		st = StatusFailed
	case acpmsg.CompletionStopped:
		st = StatusStopped
	default:
		return false, rejectf("completion status %q is not completed, failed or stopped", p.Status)
	}
	t.status = st
	t.prURL = nil
	if p.PRURL != nil {
		u := *p.PRURL
		t.prURL = &u
	}
	t.final = &m
	return true, nil
}

// prAmendment reports whether m only adds a pull request URL to the
// completion already folded: a completion with the same status and a prUrl
// where the folded one had none. The daemon sends one after it opened the
// pull request for a branch the container finished (local git mode); the
// status does not move, so the terminal rule holds.
func (t *Tracker) prAmendment(m acpmsg.Message) (string, bool) {
	p, ok := m.Payload.(*acpmsg.Completion)
	if !ok || p.PRURL == nil || t.prURL != nil || t.final == nil {
		return "", false
	}
	prev, ok := t.final.Payload.(*acpmsg.Completion)
	if !ok || prev.Status != p.Status {
		return "", false
	}
	return *p.PRURL, true
}

// unreceivedAmendment reports whether m withdraws a completed container's
// success: an error GIT_PUSH_FAILED after completion completed. The daemon
// sends one when its git service lacks commits the container's branch
// holds (local git mode): work nobody received is not completed. Sent by
// the container itself, it can only fail the container.
func (t *Tracker) unreceivedAmendment(m acpmsg.Message) bool {
	p, ok := m.Payload.(*acpmsg.ErrorPayload)
	return ok && p.Code == acpmsg.CodeGitPushFailed && t.status == StatusCompleted
}

// IsPublishNote reports whether m is the daemon's note that it could not
// publish a finished container's branch (local git mode): an error
// PUBLISH_FAILED. After the container is terminal the fold accepts it and
// changes nothing: the work was received, the note says where it is and
// how to take it, for status and logs. The Recorder takes it from the
// daemon's stream only.
func IsPublishNote(m acpmsg.Message) bool {
	p, ok := m.Payload.(*acpmsg.ErrorPayload)
	return ok && p.Code == acpmsg.CodePublishFailed
}

// unfinished lists the stories, in task-file order, that are pending or in
// progress, as "US-001 pending".
func (t *Tracker) unfinished() []string {
	var out []string
	for _, id := range t.order {
		if s := t.stories[id]; s == tasks.Pending || s == tasks.InProgress {
			out = append(out, id+" "+string(s))
		}
	}
	return out
}

// listStories joins at most five entries: the reason goes into journals,
// events and the status, one line each.
func listStories(s []string) string {
	const shown = 5
	if len(s) <= shown {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:shown], ", ") + fmt.Sprintf(", and %d more", len(s)-shown)
}

// start moves a pending container to running.
func (t *Tracker) start() bool {
	if t.status == StatusPending {
		t.status = StatusRunning
		return true
	}
	return false
}

// sameMessage reports whether b is a duplicate of a: same type, timestamp
// and payload.
func sameMessage(a, b acpmsg.Message) bool {
	if a.Type != b.Type || a.Timestamp != b.Timestamp {
		return false
	}
	switch pa := a.Payload.(type) {
	case *acpmsg.Completion:
		pb, ok := b.Payload.(*acpmsg.Completion)
		return ok && pa.Status == pb.Status && eqPtr(pa.PRURL, pb.PRURL) && slices.Equal(pa.Errors, pb.Errors)
	case *acpmsg.ErrorPayload:
		pb, ok := b.Payload.(*acpmsg.ErrorPayload)
		return ok && *pa == *pb
	}
	return false
}

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Status is the container's status.
func (t *Tracker) Status() ContainerStatus { return t.status }

// PRURL is the pull request URL of the completion, or nil.
func (t *Tracker) PRURL() *string {
	if t.prURL == nil {
		return nil
	}
	u := *t.prURL
	return &u
}

// Stories returns a copy of the per-story status map.
func (t *Tracker) Stories() map[string]tasks.Status { return maps.Clone(t.stories) }

// Progress derives storyProgress from the per-story map. Skipped stories
// count in Total only.
func (t *Tracker) Progress() Progress {
	p := Progress{Total: len(t.stories)}
	for _, s := range t.stories {
		switch s {
		case tasks.Completed:
			p.Completed++
		case tasks.Failed:
			p.Failed++
		case tasks.InProgress:
			p.InProgress++
		case tasks.Pending:
			p.Pending++
		}
	}
	return p
}

// CopyTo writes the fold's fields (status, prUrl, storyProgress) into c. It
// leaves identity, timestamps and acpPid to the caller.
func (t *Tracker) CopyTo(c *Container) {
	c.Status = t.status
	c.PRURL = t.PRURL()
	c.StoryProgress = t.Progress()
}
