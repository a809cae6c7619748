package daemon

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// maxTail bounds ?tail=: more than a journal at its cap holds is all of it.
const maxTail = 1 << 24

// logs streams a container's journal as NDJSON: the records come from the
// journal one at a time as the client takes them, never the whole journal
// at once (a journal at its cap is about a million records).
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	req, err := parseLogsRequest(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := ctxutil.WithDone(r.Context(), s.done) // ends with the request or the server
	defer cancel()
	recs, err := s.opts.Swarms.Journal(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stream(ctx, w, recs)
}

// parseLogsRequest reads GET /v1/swarms/logs's parameters: repo, name,
// follow, tail (a count), since (RFC 3339) and after (a seq).
func parseLogsRequest(q url.Values) (api.LogsRequest, error) {
	req := api.LogsRequest{RepoPath: q.Get("repo"), Name: q.Get("name")}
	if err := checkRepo("repo", req.RepoPath); err != nil {
		return req, err
	}
	if req.Name == "" {
		return req, &api.FieldError{Field: "name", Reason: "missing; give a container name from 'aimi swarm status'"}
	}
	var err error
	if req.Follow, err = parseBool(q.Get("follow")); err != nil {
		return req, &api.FieldError{Field: "follow", Reason: err.Error()}
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxTail {
			return req, &api.FieldError{Field: "tail", Reason: strconv.Quote(v) + " is not a record count from 0 to " + strconv.Itoa(maxTail)}
		}
		req.Tail = n
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return req, &api.FieldError{Field: "since", Reason: strconv.Quote(v) + " is not an RFC 3339 time, e.g. 2026-11-25T18:00:00Z"}
		}
		req.Since = t
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return req, &api.FieldError{Field: "after", Reason: strconv.Quote(v) + " is not a journal seq (0 or more)"}
		}
		req.AfterSeq = n
	}
	return req, nil
}
