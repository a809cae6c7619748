package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/aimi-tools/swarm/api"
)

// errorBody maps an error to its HTTP status and body. The orchestrator's
// sentinels decide the status; the message is the error's own text, which
// the orchestrator writes to say what to do.
func errorBody(err error) (int, api.ErrorBody) {
	body := api.ErrorBody{Error: err.Error()}
	var fe *api.FieldError
	var tfe *api.TaskFileError
	switch {
	case errors.As(err, &tfe):
		body.Code, body.Field, body.Problems = api.CodeTaskFiles, "taskFiles", tfe.Problems
		return http.StatusBadRequest, body
	case errors.As(err, &fe):
		body.Code, body.Field = api.CodeInvalid, fe.Field
		return http.StatusBadRequest, body
	case errors.Is(err, api.ErrInvalidRequest):
		body.Code = api.CodeInvalid
		return http.StatusBadRequest, body
	case errors.Is(err, api.ErrNoSwarm), errors.Is(err, api.ErrUnknownContainer):
		body.Code = api.CodeNotFound
		return http.StatusNotFound, body
	case errors.Is(err, api.ErrActiveSwarm):
		body.Code = api.CodeActiveSwarm
		return http.StatusConflict, body
	case errors.Is(err, api.ErrUnreceivedWork):
		body.Code = api.CodeUnreceived
		return http.StatusConflict, body
	case errors.Is(err, api.ErrShutdown):
		body.Code = api.CodeShuttingDown
		return http.StatusServiceUnavailable, body
	default:
		body.Code = api.CodeInternal
		return http.StatusInternalServerError, body
	}
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
