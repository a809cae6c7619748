package acpmsg

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
	// CodeGitPushFailed is aimi's own: the runner could not push its
	// branch, so the repository lacks commits the container still holds.
	CodeGitPushFailed = "GIT_PUSH_FAILED"
	// CodePublishFailed is aimi's own: the daemon could not publish a
	// finished container's branch into the user's checkout (local git
	// mode), and says why and where the work is. It is a note on a
	// finished container, not a status (package state's fold).
	CodePublishFailed     = "PUBLISH_FAILED"
	CodeTaskFileNotFound  = "TASK_FILE_NOT_FOUND"
	CodeTaskFileInvalid   = "TASK_FILE_INVALID"
	CodeACPConnectionLost = "ACP_CONNECTION_LOST"
	CodeAgentCrash        = "AGENT_CRASH"
	// CodeAgentStalled is aimi's own: a story's agent went silent with
	// nothing running (agent.stall_timeout) or repeated one tool call
	// (agent.loop_limit), was cancelled and retried once, and did it again.
	CodeAgentStalled = "AGENT_STALLED"
	// CodeBudgetExceeded is aimi's own: the swarm spent swarm.budget, or a
	// story spent more than agent.story_budget, so the container began no
	// further story; the story in progress finished and was committed and
	// pushed. It heads a stopped completion's error, with the figures.
	CodeBudgetExceeded = "BUDGET_EXCEEDED"
	CodeUnknownError   = "UNKNOWN_ERROR"
	CodeInvalidInput   = "INVALID_INPUT"
)

// Message is one envelope with its payload decoded into the concrete type
// named by Type: *TaskRequest, *ProgressUpdate, *Completion or *ErrorPayload.
//
// The validate tags are the spec's envelope rules; the custom tags (msgtype,
// rfc3339, uuid4) are registered in validate.go. Payload is validated
// separately so that its field paths read payload.<field>.
type Message struct {
	Type        Type    `json:"type" validate:"msgtype"`
	Timestamp   string  `json:"timestamp" validate:"rfc3339"` // RFC 3339
	SwarmID     string  `json:"swarmId" validate:"uuid4"`
	ContainerID string  `json:"containerId" validate:"required"`
	Payload     Payload `json:"payload" validate:"-"`
}

// Payload is implemented by the four payload types.
type Payload interface{ messageType() Type }

// TaskRequest assigns a task file to a container.
// EnvVars is never nil after decoding (absent means {}); it is omitted from
// the encoding when empty.
type TaskRequest struct {
	TaskFilePath string            `json:"taskFilePath" validate:"taskpath"`
	BranchName   string            `json:"branchName" validate:"branch"`
	RepoURL      string            `json:"repoUrl" validate:"repourl"`
	EnvVars      map[string]string `json:"envVars,omitempty" validate:"dive,keys,envkey,endkeys"`
	// BranchExists is aimi's own, optional: whether the repository held
	// BranchName when the daemon wrote the request, so the runner clones
	// that branch (or the default branch to start it from) without asking
	// the repository first. nil (absent, null or not a boolean: another
	// orchestrator, an older daemon) means unknown. Like every key the
	// spec does not name, it never makes a request invalid.
	BranchExists *bool `json:"branchExists,omitempty" validate:"-"`
}

// ProgressUpdate reports one story's new status.
// Output may be empty but must be present on the wire; use TruncateOutput
// to stay within MaxOutputChars.
type ProgressUpdate struct {
	StoryID string `json:"storyId" validate:"storyid"`
	Status  string `json:"status" validate:"oneof=pending in_progress completed failed skipped"`
	Output  string `json:"output" validate:"max=2000"`
}

// Completion is a container's final message.
// PRURL nil encodes as null (no PR); the key itself must be present on the
// wire. Errors must be non-nil (an empty list is [] on the wire); use
// CapErrors to stay within the limits.
type Completion struct {
	Status string   `json:"status" validate:"oneof=completed failed stopped"`
	PRURL  *string  `json:"prUrl" validate:"omitnil,weburl"`
	Errors []string `json:"errors" validate:"required,max=50,dive,max=500"`
}

// ErrorPayload reports a container-level, non-recoverable error.
type ErrorPayload struct {
	Code    string `json:"code" validate:"errcode"`
	Message string `json:"message" validate:"max=2000"`
}

func (*TaskRequest) messageType() Type    { return TypeTaskRequest }
func (*ProgressUpdate) messageType() Type { return TypeProgressUpdate }
func (*Completion) messageType() Type     { return TypeCompletion }
func (*ErrorPayload) messageType() Type   { return TypeError }
