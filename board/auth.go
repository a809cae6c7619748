package board

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
)

// Names of the board's external contracts.
const (
	// TokenParam is the query parameter of the URL `aimi swarm ui` prints.
	TokenParam = "token"
	// TokenHeader carries the token on every action (POST).
	TokenHeader = "X-Aimi-Board-Token"
	// cookiePrefix + the port is the session cookie's name.
	cookiePrefix = "aimi-board-"
)

// refusal is all a request without the token or the cookie gets.
const refusal = "refused: this board only answers the URL 'aimi swarm ui' printed\n"

// NewToken returns 32 random bytes, URL-safe base64.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// guard decides who may use the board.
type guard struct {
	token  []byte
	hosts  map[string]bool // Host header values the board answers to
	cookie string
}

// newGuard accepts the loopback address addr ("127.0.0.1:8080") as Host,
// and localhost with the same port.
func newGuard(token, addr string) guard {
	_, port, _ := net.SplitHostPort(addr)
	return guard{
		token:  []byte(token),
		hosts:  map[string]bool{addr: true, net.JoinHostPort("localhost", port): true},
		cookie: cookiePrefix + port,
	}
}

func (g guard) tokenOK(s string) bool {
	return s != "" && subtle.ConstantTimeCompare([]byte(s), g.token) == 1
}

// hostOK refuses a Host the board does not listen on: a page of another
// site that resolves its own name to 127.0.0.1 (DNS rebinding) sends its
// own name.
func (g guard) hostOK(r *http.Request) bool { return g.hosts[r.Host] }

// session reports whether r carries the session cookie.
func (g guard) session(r *http.Request) bool {
	c, err := r.Cookie(g.cookie)
	return err == nil && g.tokenOK(c.Value)
}

// setSession swaps the URL's token for the cookie.
func (g guard) setSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: g.cookie, Value: string(g.token), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

// sameOrigin checks what a browser says about where an action comes from:
// the Origin, when sent, must be the board's own, and Sec-Fetch-Site, when
// sent, same-origin. Browsers send both on a fetch POST; their absence
// (curl) is left to the token header.
func (g guard) sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return false
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	return true
}

// action checks a POST: session, token header, origin, JSON body.
func (g guard) action(r *http.Request) bool {
	return g.session(r) && g.tokenOK(r.Header.Get(TokenHeader)) && g.sameOrigin(r) &&
		r.Header.Get("Content-Type") == "application/json"
}
