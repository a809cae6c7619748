package contract

// ContainerBranch names the branch one container of one swarm works on, in
// the user's repository: what the git service grants a token for and what
// publish brings back into the checkout. Its fields are named so that two
// of them cannot be swapped unnoticed (they are all strings).
type ContainerBranch struct {
	Repo      string // the user's checkout, an absolute path
	Swarm     string // the swarm's id
	Container string // the container's name
	Branch    string // the branch, without refs/heads/
	// Prefilled: the container's image holds the repository's workspace
	// (a workspace image): nothing need be made ahead of its runner.
	Prefilled bool
	// Base is the commit the image's workspace is at, when known: the
	// difference to the tip can be made before the runner asks.
	Base string
}
