package contract

// AskPath is the path, on the local-mode git service's listener, where
// acp-runner puts a permission request to a person (agent.permission_policy
// ask or ask-kinds:) with its container's git token. The body is an
// AskRequest as JSON; the answer an AskAnswer.
const AskPath = "/_aimi/ask"

// AskSocket names the socket (AskSocket.sock in NetDir) on which a sandbox
// without a network reaches the daemon's inbox in either git mode: the
// socket is the container's own, so it says who asks (no token). The
// runner serves it on 127.0.0.1:AskPort (EnvNetForward) and uses it when
// the local-mode git service is not its repository (remote git mode).
const (
	AskSocket = "ask"
	AskPort   = 3130
)

// AskMaxBody bounds an AskRequest on the wire.
const AskMaxBody = 64 << 10

// Ask states of AskAnswer.
const (
	AskPending  = "pending"  // nobody answered yet: send the request again
	AskAnswered = "answered" // OptionID holds the answer
)

// AskRequest is what the runner sends, again and again until it is
// answered (so a restarted daemon learns it again). ID is the runner's own
// (16 hex digits), the same at every send.
type AskRequest struct {
	ID      string `json:"id"`
	StoryID string `json:"storyId"`
	// AskedAt is when the agent asked (RFC 3339), for the runner's logs:
	// the daemon dates a request at its arrival (a date in the past would
	// have it expire at once).
	AskedAt  string      `json:"askedAt"`
	Question AskQuestion `json:"question"`
}

// AskQuestion is the agent's request as the runner read it.
type AskQuestion struct {
	ToolCallID string      `json:"toolCallId"`
	Title      string      `json:"title"`
	Kind       string      `json:"kind"`
	Paths      []string    `json:"paths,omitempty"`
	Command    string      `json:"command,omitempty"`
	Options    []AskOption `json:"options"`
}

// AskOption is one option the agent offered.
type AskOption struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// AskAnswer is the daemon's answer. HTTP 429 refuses a request (too many
// pending of this container), 410 says its container's requests were
// dropped, 400 a malformed one: the runner rejects the tool call then.
type AskAnswer struct {
	State    string `json:"state"`
	OptionID string `json:"optionId,omitempty"`
}
