package gitserve

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// maxDrain bounds what is read and thrown away of a refused push: git sends
// the whole pack before it reads the answer, and an answer to a half-read
// body ends as "broken pipe" instead of the refusal's message.
const maxDrain = 1 << 30

// ServeHTTP serves /<swarmID>.git/{info/refs,git-upload-pack,git-receive-pack}
// (smart HTTP only) to the holders of a token for that repository.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A client that stops reading its answer would hold a git process
	// (and its slot) for ever: past requestTime, the answer's writes fail
	// and the process is killed.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(requestTime))
	rec, ok := s.lookup(requestToken(r))
	if ok && !s.fromOwnContainer(r, rec) {
		// A token is not a bearer token: used through another gateway
		// or from another address than its container's, it is refused
		// like a wrong one.
		s.log.Info("git token used from outside its container refused", "container", rec.Container, "swarm", rec.SwarmKey, "remote", r.RemoteAddr)
		s.refused(rec, refusedOutside, "a git request with this container's token came from outside it ("+whence(r)+") and was refused")
		ok = false
	}
	if !ok {
		// Same answer with no token and a wrong one, and before the path
		// is looked at: a caller without a token learns nothing.
		w.Header().Set("WWW-Authenticate", `Basic realm="aimi git service"`)
		deny(w, http.StatusUnauthorized, "aimi git service: a valid container token is required (password or Bearer token)")
		s.log.Debug("git request without a valid token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		return
	}
	if s.serveDaemonPath(w, r, rec) {
		return
	}
	key, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), ".git/")
	if !ok || key != rec.SwarmKey {
		deny(w, http.StatusForbidden, "aimi git service: this token grants access to its own swarm's repository only")
		s.log.Info("git request for another repository refused", "container", rec.Container, "path", r.URL.Path)
		s.refused(rec, refusedRepository, "a git request for "+clip(r.URL.Path)+", not this swarm's repository, was refused")
		return
	}
	service := r.URL.Query().Get("service")
	switch {
	case r.Method == http.MethodGet && rest == "info/refs" && (service == "git-upload-pack" || service == "git-receive-pack"):
	case r.Method == http.MethodPost && (rest == "git-upload-pack" || rest == "git-receive-pack"):
	default:
		deny(w, http.StatusForbidden, "aimi git service: only the smart HTTP protocol is served (info/refs, git-upload-pack, git-receive-pack)")
		return
	}
	protocol, cache := cachable(r, rest, service)
	ak := advertKey{mirror: s.mirrorPath(key), backend: s.backend, protocol: protocol}
	if cache && s.adverts.serve(w, ak) {
		s.log.Debug("git request answered from the kept capability list", "container", rec.Container, "path", r.URL.Path)
		return
	}
	release, ok := s.slots.acquire(r.Context(), rec.sandbox())
	if !ok {
		s.log.Info("git request waited too long for a git process", "container", rec.Container, "path", r.URL.Path)
		deny(w, http.StatusServiceUnavailable, "aimi git service: too many git requests of this container or of all at once; try again")
		return
	}
	defer release()
	if r.Method == http.MethodPost {
		done, ok := s.readBody(w, r, rec, rest)
		if !ok {
			return
		}
		defer done()
	}
	s.log.Debug("git request", "container", rec.Container, "method", r.Method, "path", r.URL.Path, "service", service)
	if !cache {
		s.cgi(rec).ServeHTTP(w, withoutCredentials(r, key, rest))
		return
	}
	stamp, stamped := stampOf(ak.mirror, ak.backend)
	tee := &recorder{ResponseWriter: w}
	s.cgi(rec).ServeHTTP(tee, withoutCredentials(r, key, rest))
	if stamped {
		s.adverts.keep(ak, stamp, tee)
	}
}

// serveDaemonPath answers the daemon's own paths a container's token
// also opens (questions, budgets, the ready-made workspace) and reports
// whether r was one of them.
func (s *Service) serveDaemonPath(w http.ResponseWriter, r *http.Request, rec record) bool {
	switch r.URL.Path {
	case contract.AskPath:
		s.serveAsk(w, r, rec)
	case contract.BudgetPath:
		s.serveBudget(w, r, rec)
	case contract.WorkspacePath:
		s.serveWorkspace(w, r, rec)
	default:
		return false
	}
	return true
}

// readBody reads a POST's body whole (within its limits and bodyTime) into
// a spooled file that becomes r's body; for a push, after its gate and with
// the branch's value before it, recorded once git is through. It answers
// and returns false when the request goes no further.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request, rec record, rest string) (done func(), ok bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTime))
	// The answer (a clone's pack) may take longer than bodyTime; the
	// server's read of the next request sets its own deadline.
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	if rest == "git-upload-pack" {
		return s.spoolFetch(w, r)
	}
	cmds, body, ok := s.gatePush(w, r, rec)
	if !ok {
		return nil, false
	}
	admitted, ok := s.admitPush(w, r, rec, cmds, body)
	if !ok {
		return nil, false
	}
	before, err := branchTip(r.Context(), s.mirrorPath(rec.SwarmKey), rec.Branch)
	if err != nil {
		admitted()
		deny(w, http.StatusInternalServerError, "aimi git service: cannot read the branch before the push; try again")
		s.log.Error("read the branch before a push", "container", rec.Container, "branch", rec.Branch, "err", err)
		return nil, false
	}
	return func() { s.afterPush(r, rec, before); admitted() }, true
}

// backendNice is the niceness git http-backend (and the upload-pack or
// receive-pack it runs) gets: when a fan-out's containers all begin their
// work, their clones' pack work on the daemon's host competed with the
// daemon itself, and at 32 containers status answers came 0.5 s late
// (0.15 s with runners that did nothing). Serving git is the daemon's
// background work; answering its users and the engine's events is not.
const backendNice = 10

// cgi is git http-backend for one request: the allowed ref goes to the
// pre-receive hook through the environment, the container's name becomes
// the reflog identity.
func (s *Service) cgi(rec record) *cgi.Handler {
	path, args := s.backend, []string(nil)
	if s.nice != "" {
		path, args = s.nice, []string{"-n", strconv.Itoa(backendNice), s.backend}
	}
	return &cgi.Handler{
		Path: path,
		Args: args,
		Dir:  s.repos,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.repos,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"HOME=" + s.dir,
			"REMOTE_USER=" + rec.Container,
			EnvAllowedRef + "=refs/heads/" + rec.Branch,
			// A push is kept as the pack it came as: exploded into
			// loose objects, a small pack of deltas could take many
			// times its size on disk, past what git.max_mirror counted.
			// The input limit repeats git.max_push behind the spool's.
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=receive.unpackLimit", "GIT_CONFIG_VALUE_0=1",
			"GIT_CONFIG_KEY_1=receive.maxInputSize", "GIT_CONFIG_VALUE_1=" + strconv.FormatInt(s.limits.MaxPush, 10),
		},
		InheritEnv: []string{"PATH", "TMPDIR", "LANG"},
		Stderr:     &lineLogger{log: s.log, container: rec.Container},
	}
}

// withoutCredentials is the request git http-backend sees: its path rebuilt
// from the checked parts and no Authorization header (net/http/cgi would
// put it into the environment of git and its hooks).
//
// A chunked body (git sends one for any request past http.postBuffer, 1 MiB
// by default) is handed on as a body of unknown length: net/http/cgi answers
// 400 to chunked requests, while git http-backend without CONTENT_LENGTH
// reads its input to the end, which is exactly the decoded body.
func withoutCredentials(r *http.Request, key, rest string) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Header.Del("Authorization")
	r2.URL.Path = "/" + key + ".git/" + rest
	r2.URL.RawPath = ""
	if len(r2.TransferEncoding) > 0 {
		r2.TransferEncoding = nil
		r2.ContentLength = -1
	}
	return r2
}

// gatePush reads the command list of a git-receive-pack request and lets it
// through only if every command updates exactly refs/heads/<rec.Branch> and
// none deletes it: it returns the commands and the body as git must read it
// (inflated, the command list in front). Otherwise it answers with a report
// git prints as "[remote rejected]" and returns false.
func (s *Service) gatePush(w http.ResponseWriter, r *http.Request, rec record) (PushCommands, io.Reader, bool) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			deny(w, http.StatusBadRequest, "aimi git service: push body is not valid gzip")
			return PushCommands{}, nil, false
		}
		body = zr
	}
	cmds, head, err := ParsePushCommands(body)
	if err != nil {
		s.log.Info("malformed push refused", "container", rec.Container, "err", err)
		s.refused(rec, refusedMalformed, "a malformed push was refused: "+err.Error())
		deny(w, http.StatusBadRequest, "aimi git service: push refused: "+err.Error())
		return PushCommands{}, nil, false
	}
	allowed := "refs/heads/" + rec.Branch
	var bad []RefUpdate
	for _, u := range cmds.Updates {
		if u.Ref != allowed || u.IsDelete() {
			bad = append(bad, u)
		}
	}
	if len(bad) == 0 {
		return cmds, io.MultiReader(bytes.NewReader(head), body), true
	}
	reason := func(u RefUpdate) string {
		switch {
		case u.Ref == allowed && u.IsDelete():
			return "aimi: deleting " + allowed + " is refused (it holds this container's work)"
		case u.Ref != allowed:
			return "aimi: this container may push only " + allowed
		default:
			return "aimi: refused with the rest of this push (" + bad[0].Ref + " is not allowed)"
		}
	}
	refs := make([]string, len(bad))
	for i, u := range bad {
		refs[i] = u.Ref
	}
	s.log.Info("push refused", "container", rec.Container, "allowed", allowed, "refused", refs)
	s.refused(rec, refusedRef, refusedRefReason(refs, allowed))
	s.refusePush(w, r, cmds, reason)
	return PushCommands{}, nil, false
}

// refusedRefReason is why a push of refs (from the sandbox) was refused,
// for OnRefused.
func refusedRefReason(refs []string, allowed string) string {
	if !slices.ContainsFunc(refs, func(ref string) bool { return ref != allowed }) {
		return "a push deleting " + allowed + " was refused: it holds this container's work"
	}
	return "a push to " + refusedRefs(refs) + " was refused: this container may push only " + allowed
}

// whence says where a request refused as from outside its container came
// from, for OnRefused.
func whence(r *http.Request) string {
	if _, ok := svclisten.SandboxOf(r.Context()); ok {
		return "through another container's socket"
	}
	return "from " + clip(r.RemoteAddr)
}

// countPush tells OnPush about one push.
func (s *Service) countPush(accepted bool) {
	if s.opts.OnPush != nil {
		s.opts.OnPush(accepted)
	}
}

// afterPush records the branch's value once git http-backend is done, if
// the push moved it (git may have refused it, e.g. not a fast-forward).
func (s *Service) afterPush(r *http.Request, rec record, before string) {
	// The client may be gone already; the record must still be written.
	ctx := context.WithoutCancel(r.Context())
	tip, err := branchTip(ctx, s.mirrorPath(rec.SwarmKey), rec.Branch)
	if err != nil {
		s.log.Warn("could not read the branch after a push", "container", rec.Container, "branch", rec.Branch, "err", err)
		return
	}
	if tip != "" && tip != before {
		s.countPush(true)
		s.notePush(rec.sandbox(), tip)
		s.log.Info("push received", "container", rec.Container, "branch", rec.Branch, "tip", tip)
	}
}

// requestToken reads the token from "Authorization: Bearer <token>" or
// "Authorization: Basic" with the token as password (any user name).
func requestToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	if _, pw, ok := r.BasicAuth(); ok {
		return pw
	}
	return ""
}

// deny answers with a plain-text message; git shows text/plain bodies of
// failed requests as "remote: <message>".
func deny(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// lineLogger turns git http-backend's stderr into log lines. The backend
// never sees the token (withoutCredentials), so nothing secret can pass.
type lineLogger struct {
	log       *slog.Logger
	container string
	buf       []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Warn("git http-backend", "container", l.container, "stderr", string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 4096 {
		l.log.Warn("git http-backend", "container", l.container, "stderr", string(l.buf))
		l.buf = nil
	}
	return len(p), nil
}
