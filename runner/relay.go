package runner

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// relay is how the git token reaches the repository without reaching any
// other process. The agent runs as the runner's user and may write the
// workspace's .git/config, .gitattributes and $HOME/.gitconfig, so any git
// process can be made to run the agent's programs (core.fsmonitor, filters,
// askPass, credential helpers, ...) or to connect elsewhere (insteadOf,
// http.proxy); and any same-user process can read a running git's
// /proc/<pid>/environ. So git never gets the token: it talks plain http on
// the loopback to this relay inside the (undumpable) runner process, which
// adds the Authorization header and forwards to the one repository URL of
// the task-request over TLS. Each git command gets its own unguessable path
// prefix, valid only while that command runs; what leaks of it lets a
// same-user process do, for that moment, only what the runner is doing:
// reach its own repository, whose service allows pushing only this branch.
type relay struct {
	upstream *url.URL
	auth     string // Authorization header value, "" without a token
	log      *slog.Logger
	ln       net.Listener
	srv      *http.Server

	mu       sync.Mutex
	sessions map[string]*relaySession
}

// relaySession is what the relay saw of one git command's requests.
type relaySession struct {
	upstreamErr error // a transport failure or 5xx answer: the service was away
	advertised  bool  // info/refs of the requested service answered 200
	received    bool  // a git-receive-pack POST answered 200
}

// newRelay listens on the loopback and forwards to repoURL (http or https).
// caFile, when set, is the only CA the upstream's certificate may chain to
// (as GIT_SSL_CAINFO is for git); else the system roots. dial reaches the
// upstream (Config.Dial: the runner's own way, which the agent's burst of
// connections to the same forward cannot take).
func newRelay(repoURL, authHeader, caFile string, dial dialFunc, log *slog.Logger) (*relay, error) {
	u, err := url.Parse(repoURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("git relay: %q is not an http(s) repository URL", redactURL(repoURL))
	}
	u.User = nil
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("git relay: read the CA bundle %s: %w", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("git relay: no certificate in the CA bundle %s", caFile)
		}
		tlsCfg.RootCAs = pool
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("git relay: listen on the loopback: %w", err)
	}
	r := &relay{upstream: u, auth: authHeader, log: log, ln: ln, sessions: map[string]*relaySession{}}
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialWithin(dial, 10*time.Second),
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   false, // git http-backend speaks HTTP/1.1; so does git
	}
	r.srv = &http.Server{Handler: r.handler(transport), ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// begin opens a session for one git command and returns the URL git must
// use; end closes it and reports what the relay saw.
func (r *relay) begin() (gitURL string, end func() relaySession, err error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("git relay: %w", err)
	}
	id := hex.EncodeToString(b[:])
	s := &relaySession{}
	r.mu.Lock()
	r.sessions[id] = s
	r.mu.Unlock()
	end = func() relaySession {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.sessions, id)
		return *s
	}
	return "http://" + r.ln.Addr().String() + "/" + id, end, nil
}

// note updates session id under the lock.
func (r *relay) note(id string, f func(*relaySession)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.sessions[id]; s != nil {
		f(s)
	}
}

type relayKey struct{}

func (r *relay) handler(transport http.RoundTripper) http.Handler {
	proxy := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			rest := pr.In.Context().Value(relayKey{}).(string)
			out := pr.Out
			out.URL.Scheme, out.URL.Host = r.upstream.Scheme, r.upstream.Host
			out.URL.Path = strings.TrimSuffix(r.upstream.Path, "/") + rest
			out.URL.RawPath = ""
			out.Host = r.upstream.Host
			out.Header.Del("Authorization")
			out.Header.Del("Proxy-Authorization")
			if r.auth != "" {
				out.Header.Set("Authorization", r.auth)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			id := sessionOf(resp.Request.Context())
			// An answer that breaks off after its headers never reaches
			// ErrorHandler (the proxy aborts the response): note it here,
			// so the command counts as the service being away, not as a
			// refusal, and a clone or fetch is tried again.
			resp.Body = &brokenOff{ReadCloser: resp.Body, note: func(err error) {
				r.note(id, func(s *relaySession) {
					if s.upstreamErr == nil {
						s.upstreamErr = fmt.Errorf("the repository's answer broke off: %w", err)
					}
				})
			}}
			r.note(id, func(s *relaySession) {
				switch {
				case resp.StatusCode >= 500:
					s.upstreamErr = fmt.Errorf("the repository answered %s", resp.Status)
				case resp.StatusCode == http.StatusOK && strings.HasSuffix(resp.Request.URL.Path, "/info/refs"):
					s.advertised = true
				case resp.StatusCode == http.StatusOK && strings.HasSuffix(resp.Request.URL.Path, "/git-receive-pack"):
					s.received = true
				}
			})
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			r.note(sessionOf(req.Context()), func(s *relaySession) { s.upstreamErr = err })
			r.log.Info("git relay: the repository is unreachable", "err", err)
			http.Error(w, "aimi git relay: the repository is unreachable: "+err.Error(), http.StatusBadGateway)
		},
		ErrorLog: slog.NewLogLogger(r.log.Handler(), slog.LevelDebug),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		r.mu.Lock()
		_, ok := r.sessions[id]
		r.mu.Unlock()
		if !ok || id == "" {
			http.Error(w, "aimi git relay: no such session", http.StatusNotFound)
			return
		}
		ctx := context.WithValue(req.Context(), relayKey{}, "/"+rest)
		ctx = context.WithValue(ctx, sessionKey{}, id)
		proxy.ServeHTTP(w, req.WithContext(ctx))
	})
}

type sessionKey struct{}

func sessionOf(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}

// close stops the relay.
func (r *relay) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// brokenOff tells note of a read error other than the end of the body.
type brokenOff struct {
	io.ReadCloser
	note func(error)
}

func (b *brokenOff) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.note(err)
	}
	return n, err
}

// dialFunc dials like net.Dialer.DialContext (Config.Dial).
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// dialWithin bounds each dial of dial to d; a nil dial is net.Dialer's.
func dialWithin(dial dialFunc, d time.Duration) dialFunc {
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return dial(ctx, network, addr)
	}
}
