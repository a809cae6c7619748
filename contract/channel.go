package contract

// The service channels of a sandbox without a network: the daemon serves
// each service on a socket of the sandbox's own, and the runner forwards a
// loopback port to it (EnvNetForward). Both ends bound the connections one
// sandbox holds on a channel at once, the daemon to protect itself and
// the other sandboxes, the runner to keep the agent's processes from
// taking the places its own requests (clone, push, permission requests,
// budgets) need.
const (
	// ServiceGit, ServiceModels and ServiceProxy name the git service,
	// the model gateway and the egress proxy among the forwards
	// (AskSocket and BudgetSocket name the other two).
	ServiceGit    = "git"
	ServiceModels = "models"
	ServiceProxy  = "proxy"
)

// ChannelConns is how many connections one sandbox holds at once on its
// channel to service (a forward's name): the daemon refuses more.
func ChannelConns(service string) int {
	switch service {
	case AskSocket:
		return 16 // a runner holds one per waiting story
	case BudgetSocket:
		return 8 // the runner asks once per story boundary; held ones give way (aimid's takeover listener)
	}
	return 32
}

// ChannelReserve is how many of ChannelConns(service) the runner keeps
// for its own requests: its loopback forward lets the agent's processes
// hold the others only, and its own requests do not go through that
// forward's listener.
func ChannelReserve(service string) int {
	return max(1, ChannelConns(service)/8)
}
