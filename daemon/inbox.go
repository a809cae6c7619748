package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aimi-tools/swarm/api"
)

// Inbox is the permission requests waiting for a person (package inbox).
type Inbox interface {
	List(repo string) []api.PermissionRequest
	Answer(ctx context.Context, req api.AnswerRequest) (api.AnswerReport, error)
}

// inboxRepo reads the optional repo of an inbox request as the name
// requests carry ("" = every repository); false when it has answered.
func (s *Server) inboxRepo(w http.ResponseWriter, r *http.Request, repo *string) bool {
	if *repo == "" {
		return true
	}
	if err := checkRepo("repo", *repo); err != nil {
		s.writeError(w, r, err)
		return false
	}
	if s.opts.ResolveRepo != nil {
		resolved, err := s.opts.ResolveRepo(r.Context(), *repo)
		if err != nil {
			s.writeError(w, r, err)
			return false
		}
		*repo = resolved
	}
	return true
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	repo := r.URL.Query().Get("repo")
	if !s.inboxRepo(w, r, &repo) {
		return
	}
	out := api.Inbox{Requests: []api.PermissionRequest{}}
	if s.opts.Inbox != nil {
		out.Requests = append(out.Requests, s.opts.Inbox.List(repo)...)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) answerRequest(w http.ResponseWriter, r *http.Request) {
	var req api.AnswerRequest
	if !s.decode(w, r, &req) || !s.inboxRepo(w, r, &req.RepoPath) {
		return
	}
	if req.Option == "" {
		s.writeError(w, r, &api.FieldError{Field: "option", Reason: "is empty: give an option id, allow or reject"})
		return
	}
	if s.opts.Inbox == nil {
		s.writeError(w, r, fmt.Errorf("%w: no request waits: agent.permission_policy does not ask a person (set ask or ask-kinds:...)", api.ErrUnknownContainer))
		return
	}
	rep, err := s.opts.Inbox.Answer(r.Context(), req)
	s.answer(w, r, rep, err)
}

// Inbox lists the permission requests waiting for a person (of repoPath
// only, when set).
func (c *Client) Inbox(ctx context.Context, repoPath string) (api.Inbox, error) {
	var in api.Inbox
	var q url.Values
	if repoPath != "" {
		q = url.Values{"repo": {repoPath}}
	}
	return in, c.do(ctx, http.MethodGet, "/v1/inbox", q, nil, &in)
}

// Answer answers one permission request, or every one of a container.
func (c *Client) Answer(ctx context.Context, req api.AnswerRequest) (api.AnswerReport, error) {
	var rep api.AnswerReport
	return rep, c.do(ctx, http.MethodPost, "/v1/inbox/answer", nil, req, &rep)
}
