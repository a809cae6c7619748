package board

import (
	"encoding/json"
	"net/http"

	"github.com/aimi-tools/swarm/api"
)

// Routes of the inbox of permission requests.
const (
	routeInbox  = "GET /api/inbox"
	routeAnswer = "POST /api/answer"
)

// inbox lists the requests waiting for a person (the board's repository
// only, when it has one), every agent-supplied text cleaned.
func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	in, err := s.opts.Daemon.Inbox(r.Context(), s.opts.Repo)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := api.Inbox{Requests: make([]api.PermissionRequest, 0, len(in.Requests))}
	for _, q := range in.Requests {
		q.Title, q.Kind, q.Command, q.StoryID = clean(q.Title, maxText), clean(q.Kind, 64), clean(q.Command, maxText), clean(q.StoryID, 64)
		paths := make([]string, len(q.Paths))
		for i, p := range q.Paths {
			paths[i] = clean(p, maxText)
		}
		q.Paths = paths
		opts := make([]api.PermissionOption, len(q.Options))
		for i, o := range q.Options {
			opts[i] = api.PermissionOption{ID: o.ID, Name: clean(o.Name, 200), Kind: clean(o.Kind, 64)}
		}
		q.Options = opts
		out.Requests = append(out.Requests, q)
	}
	writeJSON(w, http.StatusOK, out)
}

// answerBody is the body of /api/answer.
type answerBody struct {
	Repo   string `json:"repo"`
	ID     string `json:"id"`
	Option string `json:"option"`
}

// answerRequest passes the person's choice to the daemon, which checks it
// against the options the agent offered.
func (s *Server) answerRequest(w http.ResponseWriter, r *http.Request) {
	var req answerBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Repo == "" || req.ID == "" || req.Option == "" {
		writeJSON(w, http.StatusBadRequest, errorAnswer{Error: "not a valid answer: give the repo, the request id and an option id", Code: api.CodeInvalid})
		return
	}
	if !s.repoOK(w, req.Repo) {
		return
	}
	rep, err := s.opts.Daemon.Answer(r.Context(), api.AnswerRequest{RepoPath: req.Repo, ID: req.ID, Option: req.Option})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
