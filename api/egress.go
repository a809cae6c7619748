package api

import "time"

// EgressRules are the rules of the egress proxy in force for one running
// container: what the daemon's egress.allow, its repository's
// .aimi/config.yaml and (remote git mode) its origin allow, and what a
// person granted it through the inbox (egress.ask). Not in the state file.
type EgressRules struct {
	Config     []string `json:"config"`
	Repository []string `json:"repository"`
	Origin     []string `json:"origin,omitempty"`
	// Ask: a connection no rule allows waits for a person (egress.ask).
	Ask     bool          `json:"ask"`
	Granted []EgressGrant `json:"granted"`
}

// EgressGrant is one host a person let the container reach.
type EgressGrant struct {
	// Rule is HOST:PORT.
	Rule string `json:"rule"`
	// Scope is once (this container, until its stories StoryIDs end),
	// container (until it ends) or swarm (every container of the swarm,
	// until the swarm ends).
	Scope    string   `json:"scope"`
	StoryIDs []string `json:"storyIds,omitempty"`
	By       string   `json:"by"`
	// Who is the user whose answer it was (the daemon socket's peer:
	// "alice, uid 1000"), when known.
	Who string    `json:"who,omitempty"`
	At  time.Time `json:"at"`
}
