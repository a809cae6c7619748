package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aimi-tools/swarm/orchestrator"
)

// Routes of the API (Go 1.22 ServeMux patterns).
const (
	RouteHealth  = "GET /v1/health"
	RouteList    = "GET /v1/swarms"
	RouteStart   = "POST /v1/swarms/start"
	RouteStatus  = "GET /v1/swarms/status"
	RouteStop    = "POST /v1/swarms/stop"
	RouteResume  = "POST /v1/swarms/resume"
	RouteCleanup = "POST /v1/swarms/cleanup"
	RouteLogs    = "GET /v1/swarms/logs"
	RouteEvents  = "GET /v1/events"
)

// Error codes of ErrorBody.Code.
const (
	CodeInvalid          = "invalid_request"    // 400
	CodeNotFound         = "not_found"          // 404: no swarm / no such container
	CodeMethodNotAllowed = "method_not_allowed" // 405, with an Allow header
	CodeActiveSwarm      = "active_swarm"       // 409
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
	Problems []orchestrator.TaskFileProblem `json:"problems,omitempty"`
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
	Swarms []orchestrator.SwarmView `json:"swarms"`
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

// FieldError is an invalid request field (HTTP 400).
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, orchestrator.ErrInvalidRequest) hold.
func (e *FieldError) Is(target error) bool { return target == orchestrator.ErrInvalidRequest }

// errorBody maps an error to its HTTP status and body. The orchestrator's
// sentinels decide the status; the message is the error's own text, which
// the orchestrator writes to say what to do.
func errorBody(err error) (int, ErrorBody) {
	body := ErrorBody{Error: err.Error()}
	var fe *FieldError
	var tfe *orchestrator.TaskFileError
	switch {
	case errors.As(err, &tfe):
		body.Code, body.Field, body.Problems = CodeTaskFiles, "taskFiles", tfe.Problems
		return http.StatusBadRequest, body
	case errors.As(err, &fe):
		body.Code, body.Field = CodeInvalid, fe.Field
		return http.StatusBadRequest, body
	case errors.Is(err, orchestrator.ErrInvalidRequest):
		body.Code = CodeInvalid
		return http.StatusBadRequest, body
	case errors.Is(err, orchestrator.ErrNoSwarm), errors.Is(err, orchestrator.ErrUnknownContainer):
		body.Code = CodeNotFound
		return http.StatusNotFound, body
	case errors.Is(err, orchestrator.ErrActiveSwarm):
		body.Code = CodeActiveSwarm
		return http.StatusConflict, body
	case errors.Is(err, orchestrator.ErrShutdown):
		body.Code = CodeShuttingDown
		return http.StatusServiceUnavailable, body
	default:
		body.Code = CodeInternal
		return http.StatusInternalServerError, body
	}
}

// APIError is an error answer as the Client sees it. errors.Is matches the
// orchestrator's sentinel for its code (ErrActiveSwarm, ErrNoSwarm, ...).
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

// Is maps codes back to the orchestrator's sentinels.
func (e *APIError) Is(target error) bool {
	switch e.Body.Code {
	case CodeInvalid, CodeTaskFiles:
		return target == orchestrator.ErrInvalidRequest
	case CodeActiveSwarm:
		return target == orchestrator.ErrActiveSwarm
	case CodeShuttingDown:
		return target == orchestrator.ErrShutdown
	case CodeNotFound:
		// Both not-found sentinels share the code; the message tells them apart.
		return target == orchestrator.ErrNoSwarm || target == orchestrator.ErrUnknownContainer
	}
	return false
}

// Env variables and defaults for the socket and data locations.
const (
	// EnvSocket overrides the default socket path for aimid and aimi.
	EnvSocket       = "AIMI_SOCKET"
	socketName      = "aimid.sock"
	systemSocketDir = "/run/aimi"
)

// DefaultSocketPath is $AIMI_SOCKET, else $XDG_RUNTIME_DIR/aimi/aimid.sock,
// else /run/aimi/aimid.sock (a system daemon; the directory must belong to
// the user running aimid).
func DefaultSocketPath() string {
	if p := os.Getenv(EnvSocket); p != "" {
		return p
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "aimi", socketName)
	}
	return filepath.Join(systemSocketDir, socketName)
}

// DefaultDataDir is $XDG_STATE_HOME/aimi, else ~/.local/state/aimi: the
// daemon's own files (the git service's CA and its mirrors).
func DefaultDataDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "aimi"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the data directory: %w (set XDG_STATE_HOME or pass --data-dir)", err)
	}
	return filepath.Join(home, ".local", "state", "aimi"), nil
}
