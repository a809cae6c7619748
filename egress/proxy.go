package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// Limits bound what one container can make the proxy hold.
type Limits struct {
	ConnsPerContainer int           // open connections; more wait in the container's own socket backlog
	HeaderBytes       int           // request and response headers
	HeaderTime        time.Duration // to read a request's headers
	Idle              time.Duration // a keep-alive connection or tunnel with no traffic is closed
	Dial              time.Duration // to connect upstream
}

// DefaultLimits are the proxy's bounds unless Options say otherwise.
var DefaultLimits = Limits{ConnsPerContainer: contract.ChannelConns(contract.ServiceProxy), HeaderBytes: 32 << 10, HeaderTime: 15 * time.Second, Idle: 2 * time.Minute, Dial: 15 * time.Second}

// Denial is one refused request, for the container's journal (no header,
// no body, no credential: the method, the name and port asked for, why).
type Denial struct {
	contract.Sandbox
	Method string
	Host   string
	Port   int
	Reason string
}

// Options configure a Proxy.
type Options struct {
	Resolver Resolver            // default net.DefaultResolver
	OwnAddrs func() []netip.Addr // the host's addresses; default its interfaces'
	// OwnNets are the engine's networks, whose addresses are containers'
	// or the host's; default the networks of the host's bridges.
	OwnNets func() []netip.Prefix
	// OnDeny is told of refusals: at most one per container, method, host
	// and port every ten seconds (a flooding sandbox floods no journal).
	OnDeny func(Denial)
	Limits Limits
	Log    *slog.Logger
	// LogFirst refusals of a container are logged one by one in each
	// LogInterval, the rest summed up in one line when it ends (default
	// 5 a minute).
	LogFirst    int
	LogInterval time.Duration
	// Asker puts a refused request to a person (egress.ask) for the
	// containers AskWait gives a wait (> 0) to; the request is held
	// meanwhile. nil: every refusal is at once.
	Asker   Asker
	AskWait func(sb contract.Sandbox) time.Duration
}

// Proxy is the sandboxes' HTTP(S) proxy.
type Proxy struct {
	opts      Options
	transport *http.Transport
	refusals  *refusalLog

	mu     sync.Mutex
	recent map[Denial]time.Time
	held   map[contract.Sandbox]int // connections held for a person (ask)
}

// NewProxy returns a proxy; Serve gives it a container's connections.
func NewProxy(o Options) *Proxy {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.OwnAddrs == nil {
		o.OwnAddrs = hostAddrs
	}
	if o.OwnNets == nil {
		o.OwnNets = engineNets
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	d := DefaultLimits
	if o.Limits.ConnsPerContainer > 0 {
		d.ConnsPerContainer = o.Limits.ConnsPerContainer
	}
	for _, p := range []struct {
		dst *time.Duration
		src time.Duration
	}{{&d.HeaderTime, o.Limits.HeaderTime}, {&d.Idle, o.Limits.Idle}, {&d.Dial, o.Limits.Dial}} {
		if p.src > 0 {
			*p.dst = p.src
		}
	}
	if o.Limits.HeaderBytes > 0 {
		d.HeaderBytes = o.Limits.HeaderBytes
	}
	o.Limits = d
	p := &Proxy{opts: o, recent: map[Denial]time.Time{}, held: map[contract.Sandbox]int{}, refusals: newRefusalLog(o.Log, o.LogFirst, o.LogInterval)}
	p.transport = &http.Transport{
		Proxy:                  nil, // never chain to the daemon's own proxy settings
		DialContext:            p.dialChecked,
		DisableKeepAlives:      true, // every connection is dialled to an address checked for its request
		MaxResponseHeaderBytes: int64(d.HeaderBytes),
		ResponseHeaderTimeout:  5 * time.Minute,
	}
	return p
}

// Serve answers one container's connections on ln until ln is closed;
// rules returns that container's allowlist at each request.
func (p *Proxy) Serve(ln net.Listener, sb contract.Sandbox, rules func() []Rule) error {
	srv := &http.Server{
		Handler:           &handler{p: p, sb: sb, rules: rules},
		ReadHeaderTimeout: p.opts.Limits.HeaderTime,
		IdleTimeout:       p.opts.Limits.Idle,
		MaxHeaderBytes:    p.opts.Limits.HeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.opts.Log.Handler(), slog.LevelDebug),
	}
	// A container past its bound waits for its own connections to end.
	err := srv.Serve(svclisten.Bound(ln, p.opts.Limits.ConnsPerContainer, svclisten.Wait))
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

type addrsKey struct{}

// dialChecked dials one of the addresses the handler checked for this
// request, never the name again.
func (p *Proxy) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	addrs, _ := ctx.Value(addrsKey{}).([]netip.Addr)
	_, port, err := net.SplitHostPort(addr)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("egress proxy: no checked address for %s", addr)
	}
	return p.dialAny(ctx, addrs, port)
}

func (p *Proxy) dialAny(ctx context.Context, addrs []netip.Addr, port string) (net.Conn, error) {
	d := net.Dialer{Timeout: p.opts.Limits.Dial}
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// deny logs and reports d (both rate-limited) and answers the sandbox.
func (p *Proxy) deny(w http.ResponseWriter, d Denial, status int) {
	p.refusals.note(d)
	if p.opts.OnDeny != nil && p.fresh(d) {
		p.opts.OnDeny(d)
	}
	http.Error(w, fmt.Sprintf("aimi egress proxy: %s %s:%d refused: %s (the daemon's egress.allow decides)", d.Method, d.Host, d.Port, d.Reason), status)
}

// fresh reports whether d was not reported in the last ten seconds.
func (p *Proxy) fresh(d Denial) bool {
	key := Denial{Sandbox: d.Sandbox, Method: d.Method, Host: d.Host, Port: d.Port}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.recent[key]; ok && now.Sub(t) < 10*time.Second {
		return false
	}
	if len(p.recent) > 4096 {
		for k, t := range p.recent {
			if now.Sub(t) >= 10*time.Second {
				delete(p.recent, k)
			}
		}
	}
	p.recent[key] = now
	return true
}

type handler struct {
	p     *Proxy
	sb    contract.Sandbox
	rules func() []Rule
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, err := requestOf(r)
	if err != nil {
		h.p.deny(w, Denial{Sandbox: h.sb, Method: clip(r.Method), Host: clip(r.Host), Reason: err.Error()}, http.StatusBadRequest)
		return
	}
	d := Denial{Sandbox: h.sb, Method: q.Method, Host: q.Host, Port: q.Port}
	rule, ok := Match(h.rules(), q)
	if !ok {
		if rule, err = h.ask(r, q); err != nil {
			d.Reason = err.Error()
			h.p.deny(w, d, http.StatusForbidden)
			return
		}
	}
	addrs, err := target(r.Context(), h.p.opts.Resolver, local{h.p.opts.OwnAddrs, h.p.opts.OwnNets}, rule, q.Host)
	if err != nil {
		d.Reason = err.Error()
		h.p.deny(w, d, http.StatusForbidden)
		return
	}
	if q.Method == http.MethodConnect {
		h.tunnel(w, r, q, addrs)
		return
	}
	rp := &httputil.ReverseProxy{
		Transport: h.p.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), addrsKey{}, addrs))
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		ErrorLog: slog.NewLogLogger(h.p.opts.Log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
}

// requestOf reads what the sandbox asked for: a CONNECT authority or an
// absolute http:// URL.
func requestOf(r *http.Request) (Request, error) {
	q := Request{Method: r.Method}
	authority, defPort := r.Host, 443
	if r.Method != http.MethodConnect {
		if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" {
			return Request{}, errors.New("not a proxy request (use CONNECT for https, or an absolute http:// URL)")
		}
		authority, defPort = r.URL.Host, 80
		q.Path = r.URL.Path
		if q.Path == "" {
			q.Path = "/"
		}
		if strings.Contains("/"+q.Path+"/", "/../") || strings.Contains("/"+q.Path+"/", "/./") {
			return Request{}, errors.New("a path with . or .. segments")
		}
	}
	host, port := authority, ""
	if h, p, err := net.SplitHostPort(authority); err == nil {
		host, port = h, p
	} else if r.Method == http.MethodConnect {
		return Request{}, errors.New("CONNECT needs host:port")
	}
	q.Port = defPort
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Request{}, fmt.Errorf("bad port %q", clip(port))
		}
		q.Port = n
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if _, err := netip.ParseAddr(host); err != nil {
		if err := checkName(host); err != nil {
			return Request{}, fmt.Errorf("bad host name %q", clip(host))
		}
	}
	q.Host = host
	return q, nil
}

// tunnel connects the sandbox to the checked address and copies bytes
// both ways until either side closes or both stay silent for the idle
// limit.
func (h *handler) tunnel(w http.ResponseWriter, r *http.Request, q Request, addrs []netip.Addr) {
	up, err := h.p.dialAny(r.Context(), addrs, strconv.Itoa(q.Port))
	if err != nil {
		http.Error(w, "aimi egress proxy: connect "+q.Host+": "+err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = up.Close() }()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "aimi egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer func() { _ = down.Close() }()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	if n := buf.Reader.Buffered(); n > 0 {
		pending, _ := buf.Reader.Peek(n)
		if _, err := up.Write(pending); err != nil {
			return
		}
	}
	pipe(down, up, h.p.opts.Limits.Idle)
}

// pipe copies both ways; the idle limit ends a silent tunnel.
func pipe(a, b net.Conn, idle time.Duration) {
	var last sync.Mutex
	seen := time.Now()
	touch := func() { last.Lock(); seen = time.Now(); last.Unlock() }
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			_ = src.SetReadDeadline(time.Now().Add(idle))
			n, err := src.Read(buf)
			if n > 0 {
				touch()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				last.Lock()
				quiet := time.Since(seen) >= idle
				last.Unlock()
				if !quiet {
					continue
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	// One side is done: give the other the idle limit to finish.
	_ = a.SetDeadline(time.Now().Add(idle))
	_ = b.SetDeadline(time.Now().Add(idle))
	<-done
}

// clip bounds and cleans untrusted text for a denial record.
func clip(s string) string {
	if len(s) > 256 {
		s = s[:256]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
