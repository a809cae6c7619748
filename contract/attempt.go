package contract

// Best of N: the names the daemon, acp-runner and the agent share about
// one attempt of a task file run several times (docs/attempts.md).
const (
	// EnvAttempt is the attempt's number, 1 to N, in the environment of
	// the runner and everything it starts (agent, verify command).
	EnvAttempt = "AIMI_ATTEMPT"
	// EnvVariant is the name of the agent.variants entry the attempt
	// runs ("" without variants).
	EnvVariant = "AIMI_VARIANT"
	// EnvScoreCommand is the command `acp-runner score` runs in a scoring
	// sandbox (swarm.score_command); its standard output ends in the
	// attempt's score.
	EnvScoreCommand = "AIMI_SCORE_COMMAND"
	// LabelAttempt marks a scoring sandbox with the attempt it scores
	// (its container name), so that a daemon restarted mid-score removes
	// it.
	LabelAttempt = "org.aimi.attempt"
)

// AttemptRefPrefix is the namespace under which the user's checkout keeps
// every attempt's commits (the picked one's too): the full ref is
// AttemptRef(sb). A ref there names received work (as KeptRefPrefix's),
// so git gc keeps it and cleanup counts it received.
const AttemptRefPrefix = "refs/aimi/attempts/"

// AttemptRef is refs/aimi/attempts/<swarm id>/<container name>.
func AttemptRef(sb Sandbox) string {
	return AttemptRefPrefix + sb.Swarm + "/" + sb.Container
}
