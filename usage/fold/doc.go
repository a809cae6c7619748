// Package fold reads a container's journal into its model usage: the
// gateway's call records, each given to the story in progress when the
// call began, and the cost the runner reported for a story from its agent.
// `aimi swarm usage` prints what it gives, and the daemon shows the same
// figures beside a land's branches; it is a package of its own because
// usage cannot import state (state's records carry usage's calls).
package fold
