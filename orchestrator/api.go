package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/state"
)

// Config is the daemon-wide configuration of the Manager. The configs package
// fills it from viper; zero values take the defaults named on each field.
type Config struct {
	// Image is the sandbox image when a StartRequest names none.
	Image string
	// MaxContainers bounds how many containers of one swarm run at once
	// (default 4). A StartRequest's Max overrides it for that swarm.
	MaxContainers int
	// Resource limits per container; 0 means the engine's default.
	CPUs            float64
	MemoryBytes     int64
	MemorySwapBytes int64 // memory+swap total, as the shell tools meant it
	PidsLimit       int64
	// DiskBytes is best effort: the engine here (overlay on fuse-overlayfs)
	// has no per-container quota, so it is only passed on to the runner as
	// AIMI_SANDBOX_DISK for it to watch. Documented, not enforced.
	DiskBytes int64
	// Timeout is the longest a container may run (default 2h); past it the
	// container is stopped and fails with CONTAINER_TIMEOUT.
	Timeout time.Duration
	// StopGrace is the SIGTERM-to-SIGKILL grace of Stop (default 30s).
	StopGrace time.Duration
	// Runtime is the OCI runtime ("" = engine default, e.g. "sysbox-runc");
	// with RequireRuntime a missing runtime refuses to start the container.
	Runtime        string
	RequireRuntime bool
	ReadOnlyRoot   bool
	// EnvVars is sent in every task-request's envVars (visible in the journal:
	// no secrets here).
	EnvVars map[string]string
	// RunnerEnv goes into the container's environment (agent kind and command,
	// API keys, git author): secrets belong here, and they are never logged,
	// journaled or returned. The names the runner reads are package
	// contract's Env* constants; the Manager sets the local-mode git ones
	// itself.
	RunnerEnv map[string]string
	// Git is the local-mode git service; nil means remote mode only (the
	// repoUrl is the repository's origin).
	Git GitAccess
	// Publisher brings a local-mode container's branch into the user's
	// checkout once it completed; nil leaves the branch in the git service.
	Publisher Publisher
	// Labels are put on every container and network the Manager creates,
	// next to the org.aimi.* ones, and Recover adopts only containers that
	// carry all of them: two daemons (or parallel test runs) on one engine
	// keep apart this way. Empty for the one daemon of a machine.
	Labels map[string]string
	// Logger receives the Manager's logs (default slog.Default()).
	Logger *slog.Logger
}

// GitAccess is the daemon's git service for local mode (package gitserve):
// containers clone from and push to it instead of a hosted remote.
type GitAccess interface {
	// ListenOn makes the service reachable on ip (the swarm network's
	// gateway); idempotent per ip.
	ListenOn(ctx context.Context, ip string) error
	// Grant gives one container access to its branch of the repository.
	Grant(ctx context.Context, repoPath, swarmID, containerName, branch string) (Grant, error)
	// Revoke ends a container's access (after it finished).
	Revoke(containerName string)
	// Unreceived lists commits of the container's branch that neither the
	// service nor the user's checkout has: Cleanup keeps such containers.
	Unreceived(ctx context.Context, repoPath, containerName, branch string) (commits []string, err error)
	// Forget drops a swarm's repository and grants; Cleanup calls it once
	// none of the swarm's containers is left.
	Forget(ctx context.Context, swarmID string) error
}

// Publisher moves what a container pushed to the git service to where the
// user sees it (package publish).
type Publisher interface {
	// Publish brings the container's branch into the user's checkout (and
	// opens a pull request when configured); prURL is nil without one.
	Publish(ctx context.Context, repoPath, branch, containerName string) (prURL *string, err error)
	// Published reports whether the container's branch, as the service
	// received it, is in the user's checkout (true when it never pushed):
	// Recover publishes what a daemon that died too early did not.
	Published(ctx context.Context, repoPath, containerName, branch string) (bool, error)
}

// Grant is what a container needs to reach the git service.
type Grant struct {
	RepoURL string // https://<gateway>:<port>/<key>.git
	Token   string // secret: into the container env only
	CAFile  string // host path of the service's CA certificate
}

// StartRequest starts a swarm (or adds to one, with Append).
type StartRequest struct {
	// RepoPath is the absolute path of the repository (the directory that
	// holds .aimi/).
	RepoPath string `json:"repoPath"`
	// TaskFiles are repo-relative paths under .aimi/tasks/.
	TaskFiles []string `json:"taskFiles"`
	// Max overrides Config.MaxContainers for this swarm when > 0.
	Max int `json:"max,omitempty"`
	// Append adds the task files to the repo's active swarm; Force stops the
	// active swarm and replaces it. Without either, an active swarm is an
	// ErrActiveSwarm.
	Append bool `json:"append,omitempty"`
	Force  bool `json:"force,omitempty"`
	// Local uses the git service (Config.Git) instead of origin.
	Local bool `json:"local,omitempty"`
	// Image overrides Config.Image.
	Image string `json:"image,omitempty"`
}

// SwarmView is the answer of Start, Status, Stop and Resume: the state file's
// content plus what the schema has no field for.
type SwarmView struct {
	RepoPath   string            `json:"repoPath"`
	State      *state.Swarm      `json:"state"`
	Containers []ContainerDetail `json:"containers"`
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
	// Finished: the daemon is done with the container. It is terminal, its
	// process has exited and (local git mode) its branch was published. A
	// container is terminal by its completion a moment before that.
	Finished bool `json:"finished,omitempty"`
	// Node is the machine the container runs on; empty while every
	// container runs on the daemon's one engine.
	Node string `json:"node"`
	// Stories are the task file's stories in file order with their
	// dependencies and their status as the container reported it (the
	// task file's own status before any report); empty when the task file
	// could not be read.
	Stories []StoryDetail `json:"stories,omitempty"`
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
