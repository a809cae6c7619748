package board

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Names of the board's external contracts.
const (
	// TokenParam names the token in the fragment of the URL `aimi swarm ui`
	// prints (URL). A fragment never leaves the browser: no request, log or
	// Referer carries it.
	TokenParam = "token"
	// TokenHeader carries the token on every request under /api/. It is the
	// board's only credential: no cookie, because a browser sends a host's
	// cookies to every port of that host, so a server another local user
	// runs on another loopback port would receive it.
	TokenHeader = "X-Aimi-Board-Token"
	// staticPrefix is where the page's scripts and styles live.
	staticPrefix = "/static/"
)

// refusal is all a request without the token gets.
const refusal = "refused: this board only answers the page opened from the URL 'aimi swarm ui' printed\n"

// NewToken returns 32 random bytes, URL-safe base64.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// URL is the address to open the board on addr with token: the page keeps
// the fragment's token in its tab's sessionStorage (one origin, one tab)
// and drops it from the address bar.
func URL(addr, token string) string {
	return "http://" + addr + "/#" + url.Values{TokenParam: {token}}.Encode()
}

// guard decides who may use the board.
type guard struct {
	token []byte
	hosts map[string]bool // Host header values the board answers to
}

// newGuard accepts the loopback address addr ("127.0.0.1:8080") as Host,
// and localhost with the same port.
func newGuard(token, addr string) guard {
	_, port, _ := net.SplitHostPort(addr)
	return guard{
		token: []byte(token),
		hosts: map[string]bool{addr: true, net.JoinHostPort("localhost", port): true},
	}
}

func (g guard) tokenOK(s string) bool {
	return s != "" && subtle.ConstantTimeCompare([]byte(s), g.token) == 1
}

// hostOK refuses a Host the board does not listen on: a page of another
// site that resolves its own name to 127.0.0.1 (DNS rebinding) sends its
// own name.
func (g guard) hostOK(r *http.Request) bool { return g.hosts[r.Host] }

// sameOrigin checks what a browser says about where a request comes from:
// the Origin, when sent, must be the board's own, and Sec-Fetch-Site, when
// sent, same-origin (a page on another port of the same host is
// "same-site", and refused). Their absence (curl) is left to the token.
func (g guard) sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return false
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	return true
}

// api checks a request for anything but the page: the token header, the origin, and for
// an action (anything but GET) a JSON body, which no cross-origin form or
// no-cors fetch can send.
func (g guard) api(r *http.Request) bool {
	if !g.tokenOK(r.Header.Get(TokenHeader)) || !g.sameOrigin(r) {
		return false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	return r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/json"
}

// public reports whether r asks for the page or its scripts and styles:
// the same bytes for everybody, no swarm in them, and no token either (a
// reload has none to send). Everything else needs the token.
func public(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, staticPrefix))
}
