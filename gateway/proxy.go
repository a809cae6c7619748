package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// credHeaders are where clients put a model key: each is removed before
// the request goes upstream, whatever it held.
var credHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Proxy-Authorization", "Api-Key"}

// Route splits a gateway path into the provider's name and the path under
// it: "/anthropic/v1/messages" is ("anthropic", "/v1/messages"). ok is
// false for a path that names no provider or climbs out of it.
func Route(path string) (provider, rest string, ok bool) {
	if !strings.HasPrefix(path, "/") {
		return "", "", false
	}
	name, rest, _ := strings.Cut(path[1:], "/")
	if !nameRE.MatchString(name) {
		return "", "", false
	}
	if rest != "" {
		rest = "/" + rest
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == ".." || seg == "." {
			return "", "", false
		}
	}
	return name, rest, true
}

// Credential finds the placeholder in a request: the value of x-api-key,
// x-goog-api-key, api-key, an Authorization bearer (or basic password
// free) token, or the query's key parameter. It returns the first
// candidate that looks like a placeholder, else "".
func Credential(h http.Header, query string) string {
	var cands []string
	for _, k := range []string{"X-Api-Key", "X-Goog-Api-Key", "Api-Key"} {
		cands = append(cands, h.Values(k)...)
	}
	for _, a := range h.Values("Authorization") {
		if scheme, tok, ok := strings.Cut(strings.TrimSpace(a), " "); ok && strings.EqualFold(scheme, "Bearer") {
			cands = append(cands, strings.TrimSpace(tok))
		}
	}
	for part := range strings.SplitSeq(query, "&") {
		if v, ok := strings.CutPrefix(part, "key="); ok {
			cands = append(cands, v)
		}
	}
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) && len(c) == len(prefix)+64 {
			return c
		}
	}
	return ""
}

type callKey struct{}

// call is what the handler hands the reverse proxy.
type call struct {
	c       Call
	upAuth  string
	upKey   string
	rest    string
	prov    Provider
	tap     Tap
	started time.Time
	pass    *pass // the limiter's
}

// ServeHTTP checks the placeholder and forwards the request to its
// provider with the real key.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == contract.GatewayLimitsPath {
		s.serveLimits(w, r)
		return
	}
	name, rest, ok := Route(r.URL.Path)
	cl := &call{c: Call{Provider: name, Method: r.Method, Path: rest, Started: time.Now()}}
	if !ok {
		s.refuse(w, cl, http.StatusNotFound, "no such provider", "the path names no model provider of this gateway")
		return
	}
	rec, why := s.admit(r, Credential(r.Header, r.URL.RawQuery))
	if why != "" {
		s.refuse(w, cl, http.StatusUnauthorized, why, "the request carries no valid credential of this sandbox: use the key variable the sandbox was given, from the sandbox it was given to")
		return
	}
	cl.c.Swarm, cl.c.Container = rec.Swarm, rec.Container
	if rec.Provider != name {
		s.refuse(w, cl, http.StatusForbidden, "placeholder of another provider", "this key variable is for the "+rec.Provider+" provider")
		return
	}
	if s.refuseOverBudget(w, cl, rec.sandbox()) {
		return
	}
	release, ok := s.slot(r.Context(), rec.sandbox())
	if !ok {
		w.Header().Set("Retry-After", "5")
		s.refuse(w, cl, http.StatusTooManyRequests, "too many requests at once", fmt.Sprintf("at most %d requests of one sandbox at once", s.limits.MaxInFlight))
		return
	}
	defer release()
	cl.prov = s.providers[name]
	cl.upAuth, cl.upKey, cl.rest = cl.prov.Keys[rec.Var], s.keys[rec.Var], rest
	if r.ContentLength > s.limits.MaxBodyBytes {
		s.refuse(w, cl, http.StatusRequestEntityTooLarge, "body too large", fmt.Sprintf("the request body is larger than %d bytes", s.limits.MaxBodyBytes))
		return
	}
	pass, err := s.limiter.acquire(r.Context(), caller{provider: name, account: rec.Var, who: rec.sandbox(),
		maxConcurrent: cl.prov.MaxConcurrent, perMinute: cl.prov.RequestsPerMinute})
	if err != nil {
		s.noteAnswer(rec, name, 0, err)
		s.refuseWait(w, cl, err)
		return
	}
	cl.pass = pass
	defer func() {
		pass.done(cl.c.Status, cl.c.Header)
		s.noteAnswer(rec, name, cl.c.Status, nil)
	}()
	r.Body = http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes)
	ctx, cancel := context.WithTimeout(r.Context(), s.limits.Request)
	defer cancel()
	s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, callKey{}, cl)))
}

// refuse answers the sandbox itself, in the JSON error shape the providers
// use, and tells the observer.
func (s *Service) refuse(w http.ResponseWriter, cl *call, status int, why, msg string) {
	cl.c.Status, cl.c.Refused = status, why
	observe(s.observer, &cl.c, true)
	s.log.Debug("model gateway refused a request", "status", status, "why", why, "provider", cl.c.Provider, "container", cl.c.Container)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":"aimi_gateway","message":%q}}`+"\n", "aimi model gateway: "+msg)
}

// refuseWait answers a call the limiter did not let through: 429 with
// the time left until the provider's reset as retry-after.
func (s *Service) refuseWait(w http.ResponseWriter, cl *call, err error) {
	retry := 5
	var we *WaitError
	if errors.As(err, &we) && !we.Until.IsZero() {
		retry = max(retry, int(time.Until(we.Until).Seconds())+1)
	}
	w.Header().Set("Retry-After", strconv.Itoa(retry))
	msg := err.Error()
	s.refuse(w, cl, http.StatusTooManyRequests, "provider limited", strings.TrimPrefix(msg, "model gateway: "))
}

// slot takes one of the container's in-flight places, waiting up to a
// minute.
func (s *Service) slot(ctx context.Context, k contract.Sandbox) (func(), bool) {
	s.mu.Lock()
	ch := s.inflight[k]
	if ch == nil {
		ch = make(chan struct{}, s.limits.MaxInFlight)
		s.inflight[k] = ch
	}
	s.mu.Unlock()
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

// newProxy is the reverse proxy of every provider: the call in the
// request's context says where to and with which key.
func (s *Service) newProxy(tr http.RoundTripper) http.Handler {
	return &httputil.ReverseProxy{
		Transport: tr,
		// Streamed answers (SSE) reach the sandbox chunk by chunk.
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			cl := pr.In.Context().Value(callKey{}).(*call)
			q := pr.In.URL.Query()
			q.Del("key")
			pr.Out.URL = upstreamURL(cl.prov.URL, cl.rest, q)
			pr.Out.Host = ""
			for _, h := range credHeaders {
				pr.Out.Header.Del(h)
			}
			for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Cookie"} {
				pr.Out.Header.Del(h)
			}
			setKey(pr.Out.Header, cl.upAuth, cl.upKey)
			// The Observer reads the answer: see upstreamEncoding.
			pr.Out.Header.Set("Accept-Encoding", upstreamEncoding)
		},
		ModifyResponse: func(resp *http.Response) error {
			cl := resp.Request.Context().Value(callKey{}).(*call)
			cl.c.Status, cl.c.Header = resp.StatusCode, resp.Header.Clone()
			s.noteUpstream(cl.pass, &cl.c, resp.StatusCode, resp.Header)
			cl.tap = s.decodeFor(observe(s.observer, &cl.c, false), cl, resp.Header)
			resp.Body = &tapBody{ReadCloser: resp.Body, cl: cl, req: resp.Request}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			cl := r.Context().Value(callKey{}).(*call)
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				s.refuse(w, cl, http.StatusRequestEntityTooLarge, "body too large", fmt.Sprintf("the request body is larger than %d bytes", s.limits.MaxBodyBytes))
				return
			}
			// The error names the upstream URL, which holds no key.
			s.log.Warn("model gateway: upstream failed", "provider", cl.prov.Name, "container", cl.c.Container, "err", err)
			s.refuse(w, cl, http.StatusBadGateway, "upstream failed", "the model provider could not be reached")
		},
	}
}

// tapBody passes an answer's body to the sandbox and its observer.
type tapBody struct {
	io.ReadCloser
	cl   *call
	req  *http.Request
	n    int64
	once sync.Once
	err  error
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if n > 0 && b.cl.tap != nil {
		b.cl.tap.Body(p[:n])
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

func (b *tapBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		c := &b.cl.c
		c.ResponseBytes, c.Duration = b.n, time.Since(c.Started)
		if b.req.ContentLength > 0 {
			c.RequestBytes = b.req.ContentLength
		}
		if b.err != nil {
			c.Err = b.err.Error()
		}
		if b.cl.tap != nil {
			b.cl.tap.End(c)
		}
	})
	return err
}
