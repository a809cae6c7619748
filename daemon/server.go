package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/aimi-tools/swarm/state"
)

// Swarms is what the Server serves; the orchestrator's Manager satisfies it.
type Swarms interface {
	Start(ctx context.Context, req api.StartRequest) (api.SwarmView, error)
	Status(ctx context.Context, repoPath string) (api.SwarmView, error)
	List(ctx context.Context) []api.SwarmView
	Stop(ctx context.Context, repoPath string, names []string) (api.SwarmView, error)
	Resume(ctx context.Context, repoPath string, retryFailed bool) (api.SwarmView, error)
	Cleanup(ctx context.Context, repoPath string, force bool) (api.CleanupReport, error)
	Fetch(ctx context.Context, repoPath string, names []string) (api.FetchReport, error)
	Journal(ctx context.Context, req api.LogsRequest) (<-chan state.Record, error)
	Subscribe(ctx context.Context) <-chan api.Event
}

// maxRequestBody bounds request bodies: a start with thousands of task files
// is still far below it.
const maxRequestBody = 1 << 20

// ServerOptions configure a Server.
type ServerOptions struct {
	Swarms Swarms
	Logger *slog.Logger // default slog.Default()
	// PrepareStart, when set, completes a start request before it reaches
	// Swarms (package aimid gives configs.PrepareStart, which merges the
	// repository's .aimi/config.yaml). An error is returned to the client
	// as is (wrap an *api.FieldError for 400).
	PrepareStart func(ctx context.Context, req *api.StartRequest) error
	// ResolveRepo, when set, turns the repo of an events request into the
	// name events carry (package aimid gives orchestrator.ResolveRepo, so a
	// symlink or a subdirectory of the repository filters the same events).
	ResolveRepo func(ctx context.Context, repoPath string) (string, error)
	Version     string
	// Inbox serves the permission requests waiting for a person; nil: none
	// ever waits (the policy asks nobody).
	Inbox Inbox
	// Land lands a swarm's branches (the orchestrator's Manager.Land);
	// nil: the daemon cannot land (answered 400, saying why).
	Land func(ctx context.Context, req api.LandRequest) (api.LandReport, error)
	// Pick overrides the pick of a task file run several times (the
	// orchestrator's Manager.Pick); nil: answered 400.
	Pick func(ctx context.Context, req api.PickRequest) (api.SwarmView, error)
}

// Server serves the API over HTTP.
type Server struct {
	opts    ServerOptions
	log     *slog.Logger
	mux     *http.ServeMux
	started time.Time
	// done is closed by Shutdown so that streams (logs --follow, events)
	// end and http.Server.Shutdown does not wait for them forever.
	done     chan struct{}
	doneOnce sync.Once
	http     *http.Server
}

// NewServer builds the routes.
func NewServer(opts ServerOptions) *Server {
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), started: time.Now().UTC(), done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.Default()
	}
	handlers := map[string]http.HandlerFunc{
		api.RouteHealth: s.health, api.RouteList: s.list, api.RouteStart: s.start, api.RouteStatus: s.status, api.RouteStop: s.stop,
		api.RouteResume: s.resume, api.RouteCleanup: s.cleanup, api.RouteFetch: s.fetch, api.RouteLogs: s.logs, api.RouteEvents: s.events,
		api.RouteInbox: s.inbox, api.RouteAnswer: s.answerRequest, api.RouteLand: s.land,
		api.RoutePick: s.pick,
	}
	for pattern, h := range handlers {
		s.mux.HandleFunc(pattern, h)
	}
	// The catch-all matches every method, so the mux's own 405 never
	// happens: tell a known path with another method from an unknown path.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(handlers, r.URL.Path); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.writeError(w, r, &methodError{method: r.Method, path: r.URL.Path, allow: allow})
			return
		}
		s.writeError(w, r, &notFoundError{r.Method + " " + r.URL.Path})
	})
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ConnContext: peerContext}
	return s
}

// allowedMethods lists the methods the routes serve path with (HEAD with
// GET, as the mux serves it).
func allowedMethods(routes map[string]http.HandlerFunc, path string) []string {
	var allow []string
	for pattern := range routes {
		method, p, _ := strings.Cut(pattern, " ")
		if p != path {
			continue
		}
		allow = append(allow, method)
		if method == http.MethodGet {
			allow = append(allow, http.MethodHead)
		}
	}
	slices.Sort(allow)
	return allow
}

type methodError struct {
	method, path string
	allow        []string
}

func (e *methodError) Error() string {
	return fmt.Sprintf("%s does not take %s; use %s", e.path, e.method, strings.Join(e.allow, " or "))
}

type notFoundError struct{ route string }

func (e *notFoundError) Error() string {
	return "no such API route " + e.route + "; is aimi newer than aimid? restart the daemon"
}

// ServeHTTP logs each request (method, path, status, duration; never bodies,
// which may carry env values).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	s.mux.ServeHTTP(rw, r)
	s.log.Debug("api", "method", r.Method, "path", r.URL.Path, "status", rw.status, "duration", time.Since(start))
}

// Serve serves on ln until Shutdown (then it returns nil).
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, ends streams, and waits for in-flight requests
// until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.doneOnce.Do(func() { close(s.done) })
	return s.http.Shutdown(ctx)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// Flush passes through so streams reach the client line by line.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", PID: os.Getpid(), StartedAt: s.started, Version: s.opts.Version})
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	var req api.StartRequest
	if !s.decode(w, r, &req) {
		return
	}
	if err := checkStart(&req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.opts.PrepareStart != nil {
		if err := s.opts.PrepareStart(r.Context(), &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	view, err := s.opts.Swarms.Start(r.Context(), req)
	s.answer(w, r, view, err)
}

func checkStart(req *api.StartRequest) error {
	if err := checkRepo("repoPath", req.RepoPath); err != nil {
		return err
	}
	return req.Check()
}

// checkRepo requires an absolute path of an existing directory: the CLI
// resolves the repo before calling, and the daemon must not guess from its
// own working directory.
func checkRepo(field, p string) error {
	if err := api.CheckRepoPath(p); err != nil {
		return &api.FieldError{Field: field, Reason: err.Error()}
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.IsDir() {
		return &api.FieldError{Field: field, Reason: fmt.Sprintf("%q is not a directory the daemon can read", p)}
	}
	return nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	repo := r.URL.Query().Get("repo")
	if err := checkRepo("repo", repo); err != nil {
		s.writeError(w, r, err)
		return
	}
	view, err := s.opts.Swarms.Status(r.Context(), repo)
	s.answer(w, r, view, err)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	l := api.SwarmList{Swarms: s.opts.Swarms.List(r.Context())}
	if l.Swarms == nil {
		l.Swarms = []api.SwarmView{}
	}
	writeJSON(w, http.StatusOK, l)
}

// decodeRepo decodes a request body whose repoPath field is at repoPath
// and checks that path; false when it has answered an error.
func (s *Server) decodeRepo(w http.ResponseWriter, r *http.Request, req any, repoPath *string) bool {
	if !s.decode(w, r, req) {
		return false
	}
	if err := checkRepo("repoPath", *repoPath); err != nil {
		s.writeError(w, r, err)
		return false
	}
	return true
}

// namesGiven answers 400 for an empty name in names (why says what to
// give instead); false when it has.
func (s *Server) namesGiven(w http.ResponseWriter, r *http.Request, names []string, why string) bool {
	for i, n := range names {
		if n == "" {
			s.writeError(w, r, &api.FieldError{Field: fmt.Sprintf("names[%d]", i), Reason: why})
			return false
		}
	}
	return true
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	var req api.StopRequest
	if !s.decodeRepo(w, r, &req, &req.RepoPath) || !s.namesGiven(w, r, req.Names, "empty container name") {
		return
	}
	view, err := s.opts.Swarms.Stop(r.Context(), req.RepoPath, req.Names)
	s.answer(w, r, view, err)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var req api.ResumeRequest
	if !s.decodeRepo(w, r, &req, &req.RepoPath) {
		return
	}
	view, err := s.opts.Swarms.Resume(r.Context(), req.RepoPath, req.RetryFailed)
	s.answer(w, r, view, err)
}

func (s *Server) land(w http.ResponseWriter, r *http.Request) {
	var req api.LandRequest
	if !s.decodeRepo(w, r, &req, &req.RepoPath) || !s.namesGiven(w, r, req.Order, "empty in the order; give container names from 'aimi swarm status'") {
		return
	}
	if s.opts.Land == nil {
		s.writeError(w, r, &api.FieldError{Field: "repoPath", Reason: "this daemon cannot land branches (it has no local git service: git.mode is remote)"})
		return
	}
	rep, err := s.opts.Land(r.Context(), req)
	s.answer(w, r, rep, err)
}

func (s *Server) pick(w http.ResponseWriter, r *http.Request) {
	var req api.PickRequest
	if !s.decodeRepo(w, r, &req, &req.RepoPath) {
		return
	}
	if req.Name == "" {
		s.writeError(w, r, &api.FieldError{Field: "name", Reason: "empty; give an attempt's container name from 'aimi swarm status'"})
		return
	}
	if s.opts.Pick == nil {
		s.writeError(w, r, &api.FieldError{Field: "name", Reason: "this daemon cannot pick attempts"})
		return
	}
	view, err := s.opts.Pick(r.Context(), req)
	s.answer(w, r, view, err)
}

func (s *Server) cleanup(w http.ResponseWriter, r *http.Request) {
	var req api.CleanupRequest
	if !s.decodeRepo(w, r, &req, &req.RepoPath) {
		return
	}
	rep, err := s.opts.Swarms.Cleanup(r.Context(), req.RepoPath, req.Force)
	s.answer(w, r, rep, err)
}

func (s *Server) fetch(w http.ResponseWriter, r *http.Request) {
	var req api.FetchRequest
	if !s.decodeRepo(w, r, &req, &req.RepoPath) || !s.namesGiven(w, r, req.Names, "empty; give container names from 'aimi swarm status'") {
		return
	}
	rep, err := s.opts.Swarms.Fetch(r.Context(), req.RepoPath, req.Names)
	s.answer(w, r, rep, err)
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	repo := r.URL.Query().Get("repo")
	if repo != "" {
		if err := checkRepo("repo", repo); err != nil {
			s.writeError(w, r, err)
			return
		}
		if s.opts.ResolveRepo != nil {
			resolved, err := s.opts.ResolveRepo(r.Context(), repo)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			repo = resolved
		}
	}
	ctx, cancel := ctxutil.WithDone(r.Context(), s.done) // ends with the request or the server
	defer cancel()
	evs := s.opts.Swarms.Subscribe(ctx)
	if repo == "" {
		stream(ctx, w, evs)
		return
	}
	filtered := make(chan api.Event)
	go func() {
		defer close(filtered)
		for e := range evs {
			if e.RepoPath != repo {
				continue
			}
			select {
			case filtered <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	stream(ctx, w, filtered)
}

// stream writes every value of ch as one NDJSON line, flushing whenever the
// channel has nothing more ready (so a burst costs one flush, and a quiet
// follow still delivers each line at once), until ch closes or ctx ends.
func stream[T any](ctx context.Context, w http.ResponseWriter, ch <-chan T) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush() // headers now: the client knows the stream is open
	enc := json.NewEncoder(w)
	for {
		select {
		case <-ctx.Done():
			return
		case v, ok := <-ch:
			if !ok {
				return
			}
			if err := enc.Encode(v); err != nil {
				return // client gone
			}
			if len(ch) == 0 {
				flush()
			}
		}
	}
}

func parseBool(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean; use true or false", s)
	}
	return b, nil
}

// decode reads a JSON body, rejecting unknown fields (a typo'd field must not
// be silently ignored) and trailing data.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		s.writeError(w, r, &api.FieldError{Field: "body", Reason: fmt.Sprintf("not a valid request: %v", err)})
		return false
	}
	return true
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := errorBody(err)
	var nf *notFoundError
	var me *methodError
	switch {
	case errors.As(err, &nf):
		status, body.Code = http.StatusNotFound, api.CodeNotFound
	case errors.As(err, &me):
		status, body.Code = http.StatusMethodNotAllowed, api.CodeMethodNotAllowed
	}
	if status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Info("request refused", "method", r.Method, "path", r.URL.Path, "status", status, "code", body.Code)
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
