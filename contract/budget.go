package contract

// BudgetPath is the path where acp-runner asks the daemon at each story
// boundary whether it may begin another story (swarm.budget,
// agent.story_budget): on the container's own budget socket
// (BudgetSocket) in either git mode, or, for a container without one, on
// the daemon's git service's listener with its git token (never on a
// remote origin). The body is a BudgetRequest as JSON; the answer a
// BudgetAnswer. Budgets fail closed: any other answer (503 from a daemon
// that is starting), or none, is asked again until the daemon answers,
// and the story waits.
const BudgetPath = "/_aimi/budget"

// BudgetSocket names the socket (BudgetSocket.sock in NetDir) on which a
// sandbox without a network asks the daemon about its budgets in either
// git mode: the socket is the container's own, so it says who asks (no
// token). The runner serves it on 127.0.0.1:BudgetPort (EnvNetForward).
const (
	BudgetSocket = "budget"
	BudgetPort   = 3131
)

// DaemonCAPath is where the daemon's CA (the one of its git service and
// model gateway) is mounted in a container; GIT_SSL_CAINFO names it only
// when the repository is the daemon's git service.
const DaemonCAPath = "/etc/aimi/git-ca.pem"

// BudgetMaxBody bounds a BudgetRequest on the wire.
const BudgetMaxBody = 64 << 10

// BudgetMaxStories bounds the stories of one BudgetRequest.
const BudgetMaxStories = 500

// Budget states of BudgetAnswer.
const (
	BudgetGo   = "go"   // begin the next story
	BudgetStop = "stop" // begin none: Message says what was spent of which budget
)

// BudgetRequest is the runner's question before it begins a story: the
// stories this run finished, each with when it ran (RFC 3339, the
// runner's clock), for the daemon to count the model calls the container
// made meanwhile against agent.story_budget.
type BudgetRequest struct {
	Stories []BudgetStory `json:"stories"`
	// Running are the stories in flight (Start only): with the story the
	// question is for, when the answer is go, they are what the model
	// gateway holds to agent.story_budget until the next question.
	Running []BudgetStory `json:"running,omitempty"`
}

// BudgetStory is one finished story of the run.
type BudgetStory struct {
	ID    string `json:"id"`
	Start string `json:"start"`
	End   string `json:"end"`
}

// BudgetAnswer is the daemon's answer. Message, with BudgetStop, starts
// with the error code (acpmsg.CodeBudgetExceeded) and names the figures.
type BudgetAnswer struct {
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}
