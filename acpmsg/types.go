package acpmsg

import "encoding/json"

// Type is the envelope's message discriminator.
type Type string

// The four message types of the swarm message spec.
const (
	TypeTaskRequest    Type = "task-request"    // orchestrator -> container
	TypeProgressUpdate Type = "progress-update" // container -> orchestrator
	TypeCompletion     Type = "completion"      // container -> orchestrator
	TypeError          Type = "error"           // container -> orchestrator
)

// Spec limits. Character limits count Unicode code points, not bytes.
const (
	MaxLineBytes         = 64 * 1024 // one NDJSON line, newline excluded
	MaxOutputChars       = 2000      // progress-update.output
	MaxErrorMessageChars = 2000      // error.message
	MaxCompletionErrors  = 50        // completion.errors entries
	MaxCompletionError   = 500       // characters per completion.errors entry
)

// Story statuses carried by progress-update (same five as task files).
const (
	StoryPending    = "pending"
	StoryInProgress = "in_progress"
	StoryCompleted  = "completed"
	StoryFailed     = "failed"
	StorySkipped    = "skipped"
)

// Completion statuses.
const (
	CompletionCompleted = "completed"
	CompletionFailed    = "failed"
	CompletionStopped   = "stopped"
)

// Standard error codes of the spec. Producers may use other codes that match
// ^[A-Z][A-Z0-9_]*$.
const (
	CodeContainerOOM      = "CONTAINER_OOM"
	CodeContainerTimeout  = "CONTAINER_TIMEOUT"
	CodeGitCloneFailed    = "GIT_CLONE_FAILED"
	CodeGitCheckoutFailed = "GIT_CHECKOUT_FAILED"
	CodeTaskFileNotFound  = "TASK_FILE_NOT_FOUND"
	CodeTaskFileInvalid   = "TASK_FILE_INVALID"
	CodeACPConnectionLost = "ACP_CONNECTION_LOST"
	CodeAgentCrash        = "AGENT_CRASH"
	CodeUnknownError      = "UNKNOWN_ERROR"
	CodeInvalidInput      = "INVALID_INPUT"
)

// Message is one envelope with its payload decoded into the concrete type
// named by Type: *TaskRequest, *ProgressUpdate, *Completion or *ErrorPayload.
type Message struct {
	Type        Type    `json:"type"`
	Timestamp   string  `json:"timestamp"` // RFC 3339
	SwarmID     string  `json:"swarmId"`
	ContainerID string  `json:"containerId"`
	Payload     Payload `json:"payload"`
}

// Payload is implemented by the four payload types.
type Payload interface{ messageType() Type }

// TaskRequest assigns a task file to a container.
type TaskRequest struct {
	TaskFilePath string            `json:"taskFilePath"`
	BranchName   string            `json:"branchName"`
	RepoURL      string            `json:"repoUrl"`
	EnvVars      map[string]string `json:"envVars"`
}

// ProgressUpdate reports one story's new status.
type ProgressUpdate struct {
	StoryID string `json:"storyId"`
	Status  string `json:"status"`
	Output  string `json:"output"`
}

// Completion is a container's final message.
type Completion struct {
	Status string   `json:"status"`
	PRURL  *string  `json:"prUrl"`
	Errors []string `json:"errors"`
}

// ErrorPayload reports a container-level, non-recoverable error.
type ErrorPayload struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (*TaskRequest) messageType() Type    { return TypeTaskRequest }
func (*ProgressUpdate) messageType() Type { return TypeProgressUpdate }
func (*Completion) messageType() Type     { return TypeCompletion }
func (*ErrorPayload) messageType() Type   { return TypeError }

// keep encoding/json imported for the codec file that implements
// Message.UnmarshalJSON.
var _ json.Marshaler = (*json.RawMessage)(nil)
