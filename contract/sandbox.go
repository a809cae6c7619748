package contract

// Sandbox names one container of one swarm: what the daemon's services (the
// git service, the model gateway, the container's own sockets) grant to,
// serve and revoke. Its fields are named so that the two cannot be swapped
// unnoticed (they are both strings).
type Sandbox struct {
	Swarm     string // the swarm's id
	Container string // the container's name
}

// Sandbox is the container cb names, without its repository and branch.
func (cb ContainerBranch) Sandbox() Sandbox {
	return Sandbox{Swarm: cb.Swarm, Container: cb.Container}
}
