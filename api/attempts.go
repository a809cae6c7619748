package api

// RoutePick overrides the pick of a task file run several times
// (PickRequest; the answer is the SwarmView).
const RoutePick = "POST /v1/swarms/pick"

// EventAttemptPicked says a task file's attempt was picked (by the daemon
// or by hand): ContainerName is the picked attempt, Output the line
// status shows.
const EventAttemptPicked EventKind = "attempt-picked"

// PickRequest picks the attempt Name (a container of the swarm) for its
// task file instead of the daemon's pick.
type PickRequest struct {
	RepoPath string `json:"repoPath"`
	Name     string `json:"name"`
}
