package api

import (
	"context"
	"time"
)

// Event kinds of the inbox: a permission request waits for a person, and
// one was answered (by a person, by the timeout's fallback, or dropped
// because its container ended).
const (
	EventPermissionRequested EventKind = "permission-requested"
	EventPermissionAnswered  EventKind = "permission-answered"
)

// Routes of the inbox.
const (
	RouteInbox  = "GET /v1/inbox"
	RouteAnswer = "POST /v1/inbox/answer"
)

// PermissionRequest is one agent's permission request waiting for a person.
// Every text field comes from the agent: filter it before a terminal or page.
type PermissionRequest struct {
	ID            string `json:"id"`
	RepoPath      string `json:"repoPath"`
	SwarmID       string `json:"swarmId"`
	ContainerName string `json:"containerName"`
	// Containers are every container waiting on a request of the egress
	// proxy (kind fetch): one request per host and swarm, which the
	// containers that ask for the host join.
	Containers []string           `json:"containers,omitempty"`
	StoryID    string             `json:"storyId,omitempty"`
	Title      string             `json:"title"`
	Kind       string             `json:"kind"`
	Paths      []string           `json:"paths,omitempty"`
	Command    string             `json:"command,omitempty"`
	Options    []PermissionOption `json:"options"`
	AskedAt    time.Time          `json:"askedAt"`
	// Deadline is when the fallback answers it (agent.ask_timeout).
	Deadline time.Time `json:"deadline"`
}

// PermissionOption is one answer the agent offered.
type PermissionOption struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// Inbox answers GET /v1/inbox (?repo= keeps one repository's requests):
// the pending requests, oldest first.
type Inbox struct {
	Requests []PermissionRequest `json:"requests"`
}

// AnswerRequest answers one pending request (ID), or with AllFrom every
// pending request of that container. Option is an option id, or "allow" /
// "reject" for the first option of that kind (once preferred to always).
type AnswerRequest struct {
	RepoPath string `json:"repoPath,omitempty"`
	ID       string `json:"id,omitempty"`
	AllFrom  string `json:"allFrom,omitempty"`
	Option   string `json:"option"`
}

// AnswerReport lists what an answer answered.
type AnswerReport struct {
	Answered []Answered `json:"answered"`
}

// Answered is one request and the option chosen for it.
type Answered struct {
	ID            string `json:"id"`
	ContainerName string `json:"containerName"`
	OptionID      string `json:"optionId"`
}

type requesterKey struct{}

// WithRequester is ctx carrying who made an API request: the user of the
// daemon socket's peer, as the kernel names it.
func WithRequester(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, requesterKey{}, who)
}

// RequesterOf is who made the API request of ctx ("" when not known).
func RequesterOf(ctx context.Context) string {
	s, _ := ctx.Value(requesterKey{}).(string)
	return s
}
