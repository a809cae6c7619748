package board

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/state"
)

// Daemon is what the board asks of aimid; *daemon.Client satisfies it.
type Daemon interface {
	List(ctx context.Context) (api.SwarmList, error)
	Stop(ctx context.Context, repoPath string, names []string) (api.SwarmView, error)
	Resume(ctx context.Context, repoPath string, retryFailed bool) (api.SwarmView, error)
	Cleanup(ctx context.Context, repoPath string, force bool) (api.CleanupReport, error)
	Logs(ctx context.Context, req api.LogsRequest, fn func(state.Record) error) error
	Events(ctx context.Context, repoPath string, fn func(api.Event) error) error
	Inbox(ctx context.Context, repoPath string) (api.Inbox, error)
	Answer(ctx context.Context, req api.AnswerRequest) (api.AnswerReport, error)
}

//go:embed assets
var assets embed.FS

// Routes of the board.
const (
	routePage    = "GET /{$}"
	routeStatic  = "GET /static/"
	routeSwarms  = "GET /api/swarms"
	routeEvents  = "GET /api/events"
	routeJournal = "GET /api/journal"
	routeStop    = "POST /api/stop"
	routeResume  = "POST /api/resume"
	routeCleanup = "POST /api/cleanup"
)

// maxActionBody bounds an action's JSON body: a repo path and a few names.
const maxActionBody = 64 << 10

// Options configure a Server.
type Options struct {
	Daemon Daemon
	// Token is the secret of the URL (NewToken) and of every API request.
	Token string
	// Addr is the loopback host:port the board listens on; requests for any
	// other Host are refused.
	Addr string
	// Repo, when set, is the one repository (as the daemon keys it) the
	// board shows and acts on; empty: every swarm the daemon holds.
	Repo   string
	Logger *slog.Logger // default slog.Default()
	// Limits bound the connections Serve keeps (zero: the defaults).
	Limits Limits
	// Heal is how often the events stream re-sends the whole list after
	// changes, so that events a slow page lost are made good (default 5s).
	Heal time.Duration
}

// Server is the board's http.Handler.
type Server struct {
	opts  Options
	log   *slog.Logger
	guard guard
	mux   *http.ServeMux
	page  []byte
	done  chan struct{}

	mu   sync.Mutex
	hs   *http.Server // set by Serve
	shut bool         // Shutdown was called
}

// New returns the board for opts.
func New(opts Options) (*Server, error) {
	if opts.Daemon == nil || len(opts.Token) < 32 || opts.Addr == "" {
		return nil, errors.New("board: a daemon client, a token of at least 32 characters and the listen address are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Heal <= 0 {
		opts.Heal = 5 * time.Second
	}
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		return nil, fmt.Errorf("board: parse the page: %w", err)
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("board: assets: %w", err)
	}
	s := &Server{opts: opts, log: opts.Logger, guard: newGuard(opts.Token, opts.Addr), mux: http.NewServeMux(), page: page, done: make(chan struct{})}
	s.mux.HandleFunc(routePage, s.index)
	s.mux.Handle(routeStatic, http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc(routeSwarms, s.swarms)
	s.mux.HandleFunc(routeEvents, s.events)
	s.mux.HandleFunc(routeJournal, s.journal)
	s.mux.HandleFunc(routeStop, s.stop)
	s.mux.HandleFunc(routeResume, s.resume)
	s.mux.HandleFunc(routeCleanup, s.cleanup)
	s.mux.HandleFunc(routeInbox, s.inbox)
	s.mux.HandleFunc(routeAnswer, s.answerRequest)
	return s, nil
}

// Close ends the open streams (so that http.Server.Shutdown does not wait
// for them).
func (s *Server) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}

// ServeHTTP guards every route: a wrong Host gets the refusal, and so does
// any route but the page and its assets without the token header.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer") // the first URL carries the token
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	if !s.guard.hostOK(r) {
		s.refuse(w, r, "host")
		return
	}
	if !public(r) && !s.guard.api(r) {
		s.refuse(w, r, "no token header, from another origin, or an action that is not JSON")
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, why string) {
	s.log.Info("board: request refused", "method", r.Method, "path", r.URL.Path, "why", why)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	// A refused client keeps no idle connection open.
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, refusal)
}

// index serves the page: no data and no token in it; its script takes the
// token from the URL's fragment or its tab's sessionStorage.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(s.page)
}

func (s *Server) swarms(w http.ResponseWriter, r *http.Request) {
	l, err := s.list(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, boardList(l))
}

// actionRequest is the body of every action.
type actionRequest struct {
	Repo        string   `json:"repo"`
	Names       []string `json:"names,omitempty"`
	RetryFailed bool     `json:"retryFailed,omitempty"`
}

func (s *Server) decode(w http.ResponseWriter, r *http.Request) (actionRequest, bool) {
	var req actionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Repo == "" {
		writeJSON(w, http.StatusBadRequest, errorAnswer{Error: "not a valid action: give the swarm's repo (and container names to stop some)", Code: api.CodeInvalid})
		return req, false
	}
	return req, s.repoOK(w, req.Repo)
}

// repoOK refuses a repository the board was not opened for (--repo).
func (s *Server) repoOK(w http.ResponseWriter, repo string) bool {
	if s.opts.Repo == "" || repo == s.opts.Repo {
		return true
	}
	writeJSON(w, http.StatusNotFound, errorAnswer{Error: "this board shows only the swarm of " + s.opts.Repo, Code: api.CodeNotFound})
	return false
}

// list is the daemon's list, only the board's repository when it has one.
func (s *Server) list(ctx context.Context) (api.SwarmList, error) {
	l, err := s.opts.Daemon.List(ctx)
	if err != nil || s.opts.Repo == "" {
		return l, err
	}
	mine := api.SwarmList{Swarms: []api.SwarmView{}}
	for _, v := range l.Swarms {
		if v.RepoPath == s.opts.Repo {
			mine.Swarms = append(mine.Swarms, v)
		}
	}
	return mine, nil
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decode(w, r)
	if !ok {
		return
	}
	v, err := s.opts.Daemon.Stop(r.Context(), req.Repo, req.Names)
	s.answer(w, v, err)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decode(w, r)
	if !ok {
		return
	}
	v, err := s.opts.Daemon.Resume(r.Context(), req.Repo, req.RetryFailed)
	s.answer(w, v, err)
}

// cleanup never forces: containers holding commits nobody received are
// kept, and the report says which and why, as the CLI does without --force.
func (s *Server) cleanup(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decode(w, r)
	if !ok {
		return
	}
	rep, err := s.opts.Daemon.Cleanup(r.Context(), req.Repo, false)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, cleanText(rep))
}

func (s *Server) answer(w http.ResponseWriter, v api.SwarmView, err error) {
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, boardSwarm(v))
}

// errorAnswer is every error the page gets.
type errorAnswer struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// fail passes the daemon's refusal on with its status; an unreachable
// daemon is a 502.
func (s *Server) fail(w http.ResponseWriter, err error) {
	var ae *api.APIError
	switch {
	case errors.As(err, &ae):
		writeJSON(w, ae.Status, errorAnswer{Error: clean(ae.Body.Error, maxText), Code: ae.Body.Code})
	case errors.Is(err, daemon.ErrUnreachable):
		writeJSON(w, http.StatusBadGateway, errorAnswer{Error: clean(err.Error(), maxText), Code: "daemon_unreachable"})
	default:
		s.log.Error("board: daemon call failed", "err", err)
		writeJSON(w, http.StatusBadGateway, errorAnswer{Error: clean(err.Error(), maxText), Code: "daemon_failed"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
