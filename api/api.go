package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/state"
)

// StartRequest starts a swarm (or adds to one, with Append).
type StartRequest struct {
	// RepoPath is the absolute path of the repository (the directory that
	// holds .aimi/).
	RepoPath string `json:"repoPath"`
	// TaskFiles are repo-relative paths under .aimi/tasks/.
	TaskFiles []string `json:"taskFiles"`
	// Max overrides the daemon's swarm.max_containers for this swarm when > 0.
	Max int `json:"max,omitempty"`
	// Append adds the task files to the repo's active swarm; Force stops the
	// active swarm and replaces it. Without either, an active swarm is an
	// ErrActiveSwarm.
	Append bool `json:"append,omitempty"`
	Force  bool `json:"force,omitempty"`
	// Local uses the git service of aimid instead of origin.
	Local bool `json:"local,omitempty"`
	// Image overrides the daemon's sandbox.image.
	Image string `json:"image,omitempty"`
	// Attempts runs each task file this many times (best of N,
	// docs/attempts.md); 0 or 1: once. AttemptsStop is "all" (default)
	// or "first-verified".
	Attempts     int    `json:"attempts,omitempty"`
	AttemptsStop string `json:"attemptsStop,omitempty"`
}

// SwarmView is the answer of Start, Status, Stop and Resume: the state file's
// content plus what the schema has no field for.
type SwarmView struct {
	RepoPath   string            `json:"repoPath"`
	State      *state.Swarm      `json:"state"`
	Containers []ContainerDetail `json:"containers"`
	// Conflicts is the conflict radar's last look: the pairs of branches
	// (or a branch and the landing target) that would conflict or overlap.
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Land is the swarm's last land (aimi swarm land), nil before one.
	Land *LandReport `json:"land,omitempty"`
	// Summary counts the containers by status, those completed with
	// failed stories apart (state.Summarize); derived from State.
	Summary *state.Summary `json:"summary,omitempty"`
	// Attempts are the task files run several times (best of N), each
	// with its attempts and the pick, as the state file records them.
	Attempts []*state.AttemptSet `json:"attempts,omitempty"`
}

// ContainerDetail is the daemon's extra knowledge of one container.
type ContainerDetail struct {
	Name        string        `json:"name"`
	ContainerID string        `json:"containerId"`
	TaskFile    string        `json:"taskFile"`
	Branch      string        `json:"branch"`
	Status      string        `json:"status"`
	ExitCode    *int          `json:"exitCode,omitempty"`
	OOMKilled   bool          `json:"oomKilled,omitempty"`
	Errors      []ErrorDetail `json:"errors,omitempty"`
	// LastOutput is the output of the last progress-update (or the last
	// invalid line's reason) seen from the container.
	LastOutput string  `json:"lastOutput,omitempty"`
	PRURL      *string `json:"prUrl,omitempty"`
	// Rejected counts lines that were journaled but not folded (invalid or
	// breaking the story transition table).
	Rejected int `json:"rejected,omitempty"`
	// EgressDenied counts the requests the egress proxy refused the
	// container (journaled as egress-denied records).
	EgressDenied int `json:"egressDenied,omitempty"`
	// GitRefused counts the requests the local-mode git service refused
	// the container (journaled as git-refused records).
	GitRefused int `json:"gitRefused,omitempty"`
	// Finished: the daemon is done with the container. It is terminal, its
	// process has exited and (local git mode) its branch was published. A
	// container is terminal by its completion a moment before that.
	Finished bool `json:"finished,omitempty"`
	// CompletedWithFailures: the container is completed (Status, as the
	// message spec says: every story finished) but some of its stories
	// failed; `aimi swarm resume --retry-failed` reruns them.
	CompletedWithFailures bool `json:"completedWithFailures,omitempty"`
	// Node is the machine the container runs on; empty while every
	// container runs on the daemon's one engine.
	Node string `json:"node"`
	// Stories are the task file's stories in file order with their
	// dependencies and their status as the container reported it (the
	// task file's own status before any report); empty when the task file
	// could not be read.
	Stories []StoryDetail `json:"stories,omitempty"`
	// LimitWaits are the container's calls held at the model gateway now,
	// one per provider: for its limit's reset, max_concurrent or
	// requests_per_minute. Not in the state file.
	LimitWaits []LimitWait `json:"limitWaits,omitempty"`
	// Egress are the egress proxy's rules in force for the container
	// while it runs (nil when the sandboxes keep a network, or it ended).
	// Not in the state file.
	Egress *EgressRules `json:"egress,omitempty"`
}

// LimitWait is a container's calls to one provider held at the model
// gateway.
type LimitWait struct {
	Provider string `json:"provider"`
	// Reason is "limit" (until the provider's reset), "max_concurrent" or
	// "requests_per_minute".
	Reason string `json:"reason"`
	// Until is the limit's reset (Reason "limit").
	Until *time.Time `json:"until,omitempty"`
	Since time.Time  `json:"since"`
	Calls int        `json:"calls"`
	// Text says it as status shows it: "waiting for anthropic limit until
	// 15:04:05" (the daemon's local time), "waiting for a anthropic call
	// slot (max_concurrent 4)".
	Text string `json:"text"`
}

// StoryDetail is one story of a container's task file: a node of its
// dependsOn graph.
type StoryDetail struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	DependsOn []string `json:"dependsOn"`
	Status    string   `json:"status"`
}

// ErrorDetail is one error of a container: from its error message or
// completion, or decided by the daemon (CONTAINER_OOM, CONTAINER_TIMEOUT,
// AGENT_CRASH, CONTAINER_LOST).
type ErrorDetail struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// CleanupReport says what Cleanup removed and what it kept.
type CleanupReport struct {
	RepoPath string   `json:"repoPath"`
	Removed  []string `json:"removed"` // container names removed with their state entries
	Kept     []Kept   `json:"kept"`
	// Lost lists containers removed with Force although they held commits
	// nobody received.
	Lost []Kept `json:"lost,omitempty"`
	// StateRemoved is true when no entry was left and the state file went.
	StateRemoved bool `json:"stateRemoved"`
	// Notes are what else the user should know, e.g. that the git service
	// kept a swarm's repository because it holds unpublished commits.
	Notes []string `json:"notes,omitempty"`
}

// FetchRequest brings the branches of finished containers whose last push
// never arrived out of the containers (all of the swarm's without Names).
type FetchRequest struct {
	RepoPath string   `json:"repoPath"`
	Names    []string `json:"names,omitempty"`
}

// FetchReport says which branches Fetch brought into the checkout.
type FetchReport struct {
	RepoPath string    `json:"repoPath"`
	Fetched  []Fetched `json:"fetched"`
	// Skipped are containers with nothing to fetch or that failed, and why.
	Skipped []Kept `json:"skipped"`
}

// Fetched is one branch Fetch brought out of its container.
type Fetched struct {
	Name   string  `json:"name"`
	Branch string  `json:"branch"`
	Tip    string  `json:"tip"`
	PRURL  *string `json:"prUrl,omitempty"`
	// Ref is the ref of the checkout holding Tip when it is not the
	// branch (remote mode: a keep ref, until origin has the commits).
	Ref string `json:"ref,omitempty"`
	// Note says what else happened (remote mode: pushed to origin, or why
	// not).
	Note string `json:"note,omitempty"`
}

// Kept is a container Cleanup did not remove, and why.
type Kept struct {
	Name    string   `json:"name"`
	Reason  string   `json:"reason"`
	Commits []string `json:"commits,omitempty"`
}

// EventKind names what changed.
type EventKind string

// Event kinds published by Subscribe.
const (
	EventSwarmStarted     EventKind = "swarm-started"
	EventContainerCreated EventKind = "container-created"
	EventContainerStarted EventKind = "container-started"
	EventProgress         EventKind = "progress"      // a valid message was folded
	EventLineRejected     EventKind = "line-rejected" // journaled, not folded
	EventContainerExited  EventKind = "container-exited"
	EventSwarmFinished    EventKind = "swarm-finished" // every container terminal
	EventSwarmRemoved     EventKind = "swarm-removed"  // cleanup dropped the state
	// A container's calls began waiting at the model gateway (Output:
	// "waiting for anthropic limit until 15:04:05"), or went on after it
	// (limit-wait-over). The journal holds the same as daemon records
	// whose reason is EventLimitWait.
	EventLimitWait     EventKind = "limit-wait"
	EventLimitWaitOver EventKind = "limit-wait-over"
)

// Event is one state change.
type Event struct {
	Time          time.Time `json:"time"`
	SwarmID       string    `json:"swarmId"`
	RepoPath      string    `json:"repoPath"`
	ContainerName string    `json:"containerName,omitempty"`
	Kind          EventKind `json:"kind"`
	// Status is the container's status after the change.
	Status      string `json:"status,omitempty"`
	MessageType string `json:"messageType,omitempty"`
	StoryID     string `json:"storyId,omitempty"`
	StoryStatus string `json:"storyStatus,omitempty"`
	// Output is the progress output, the rejection reason or the error.
	Output string `json:"output,omitempty"`
	Code   string `json:"code,omitempty"`
	// RequestID names the permission request of a permission-* event;
	// Request is the whole request (permission-requested), Option the
	// option chosen and AnsweredBy "person", "timeout" or "container-ended"
	// (permission-answered).
	RequestID  string             `json:"requestId,omitempty"`
	Request    *PermissionRequest `json:"request,omitempty"`
	Option     string             `json:"option,omitempty"`
	AnsweredBy string             `json:"answeredBy,omitempty"`
	// Conflict is the pair of a conflict-detected or conflict-cleared event.
	Conflict *Conflict `json:"conflict,omitempty"`
}

// Errors the daemon maps to HTTP codes (errors.Is / errors.As).
var (
	// ErrActiveSwarm: the repo has a swarm with non-terminal containers and
	// the request had neither Append nor Force (HTTP 409).
	ErrActiveSwarm = errors.New("an active swarm exists in this repository; use --append to add to it or --force to replace it")
	// ErrNoSwarm: the repo has no swarm (HTTP 404).
	ErrNoSwarm = errors.New("no swarm in this repository; start one with 'aimi swarm start'")
	// ErrUnknownContainer: a name given to Stop or Journal is not in the
	// swarm (HTTP 404).
	ErrUnknownContainer = errors.New("no such container in the swarm")
	// ErrInvalidRequest: a request field is wrong (HTTP 400); the wrapping
	// error names the field.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnreceivedWork: a rerun would replace a container holding commits
	// nobody received, and they could not be taken out of it first; the
	// container is kept (HTTP 409).
	ErrUnreceivedWork = errors.New("a container holds work nobody received")
	// ErrShutdown: the Manager is shutting down (HTTP 503).
	ErrShutdown = errors.New("the daemon is shutting down")
)

// TaskFileError lists every task file that failed validation in Start; no
// container was created. errors.Is(err, ErrInvalidRequest) holds.
type TaskFileError struct {
	Problems []TaskFileProblem
}

// TaskFileProblem is one invalid task file and why.
type TaskFileProblem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (e *TaskFileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d invalid task file(s), nothing was started:", len(e.Problems))
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %s: %s", p.Path, p.Reason)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidRequest) true.
func (e *TaskFileError) Is(target error) bool { return target == ErrInvalidRequest }

// Routes of the API (Go 1.22 ServeMux patterns).
const (
	RouteHealth  = "GET /v1/health"
	RouteList    = "GET /v1/swarms"
	RouteStart   = "POST /v1/swarms/start"
	RouteStatus  = "GET /v1/swarms/status"
	RouteStop    = "POST /v1/swarms/stop"
	RouteResume  = "POST /v1/swarms/resume"
	RouteCleanup = "POST /v1/swarms/cleanup"
	RouteFetch   = "POST /v1/swarms/fetch"
	RouteLogs    = "GET /v1/swarms/logs"
	RouteEvents  = "GET /v1/events"
)

// Error codes of ErrorBody.Code.
const (
	CodeInvalid          = "invalid_request"    // 400
	CodeNotFound         = "not_found"          // 404: no swarm / no such container
	CodeMethodNotAllowed = "method_not_allowed" // 405, with an Allow header
	CodeActiveSwarm      = "active_swarm"       // 409
	CodeUnreceived       = "unreceived_work"    // 409
	CodeShuttingDown     = "shutting_down"      // 503
	CodeInternal         = "internal"           // 500
	CodeTaskFiles        = "invalid_task_file"  // 400 with Problems
)

// ErrorBody is every error answer.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Field is the request field at fault (400).
	Field string `json:"field,omitempty"`
	// Problems lists the invalid task files of a start (400).
	Problems []TaskFileProblem `json:"problems,omitempty"`
}

// Health answers GET /v1/health.
type Health struct {
	Status    string    `json:"status"` // "ok"
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
	Version   string    `json:"version,omitempty"`
}

// SwarmList answers GET /v1/swarms: every swarm the daemon holds, sorted by
// repository.
type SwarmList struct {
	Swarms []SwarmView `json:"swarms"`
}

// LogsRequest asks for one container's journal (GET /v1/swarms/logs, as
// query parameters). Tail, Since and AfterSeq each keep only the end of
// the journal; together, the shortest end that meets them all.
type LogsRequest struct {
	RepoPath string
	Name     string
	// Follow goes on with new records until the container is done.
	Follow bool
	// Tail keeps the last this many records (0: no limit).
	Tail int
	// Since keeps the records journaled at or after this time.
	Since time.Time
	// AfterSeq keeps the records after this seq: a reader resuming.
	AfterSeq int64
}

// StopRequest stops the named containers, or the whole swarm without names.
type StopRequest struct {
	RepoPath string   `json:"repoPath"`
	Names    []string `json:"names,omitempty"`
}

// ResumeRequest resumes a swarm.
type ResumeRequest struct {
	RepoPath    string `json:"repoPath"`
	RetryFailed bool   `json:"retryFailed,omitempty"`
}

// CleanupRequest removes a swarm's finished containers.
type CleanupRequest struct {
	RepoPath string `json:"repoPath"`
	Force    bool   `json:"force,omitempty"`
}

// APIError is an error answer as the Client sees it. errors.Is matches the
// sentinel of its code (ErrActiveSwarm, ErrNoSwarm, ...).
type APIError struct {
	Status int
	Body   ErrorBody
}

func (e *APIError) Error() string {
	if e.Body.Error == "" {
		return fmt.Sprintf("daemon answered HTTP %d", e.Status)
	}
	return e.Body.Error
}

// Is maps codes back to this package's sentinels.
func (e *APIError) Is(target error) bool {
	switch e.Body.Code {
	case CodeInvalid, CodeTaskFiles:
		return target == ErrInvalidRequest
	case CodeActiveSwarm:
		return target == ErrActiveSwarm
	case CodeUnreceived:
		return target == ErrUnreceivedWork
	case CodeShuttingDown:
		return target == ErrShutdown
	case CodeNotFound:
		// Both not-found sentinels share the code; the message tells them apart.
		return target == ErrNoSwarm || target == ErrUnknownContainer
	}
	return false
}
