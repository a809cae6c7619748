package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// Scopes of a grant: the option ids a person answers a fetch request
// with, but ScopeReject.
const (
	ScopeOnce      = "once"      // this container, this host, until the story ends
	ScopeContainer = "container" // this container, until it ends
	ScopeSwarm     = "swarm"     // every container of the swarm, until the swarm ends
	ScopeReject    = "reject"    // refused
)

// maxHeld bounds the connections of one container held while a person
// is asked: an agent decides how many it opens, and each held one is one
// of its Limits.ConnsPerContainer too.
const maxHeld = 8

// maxAskPath bounds the path an Ask carries.
const maxAskPath = 256

// Ask is one connection the allowlist refused, waiting for a person: what
// the sandbox asked for (Path for plain http only, without its query) and
// whether the name resolves into a private range (the person is told: a
// grant reaches it then, never an address of this machine).
type Ask struct {
	contract.Sandbox
	Method  string
	Host    string
	Port    int
	Path    string
	Private bool
}

// Target is HOST:PORT of a.
func (a Ask) Target() string { return a.Host + ":" + strconv.Itoa(a.Port) }

// Verdict is a person's answer to an Ask.
type Verdict struct {
	Allow   bool
	Scope   string // one of the Scope constants
	Private bool   // the grant may reach a private address (the person was told)
	// Reason says why a refusal came without a person (bounds, an earlier
	// refusal of the host); "" for a person's.
	Reason string
}

// Asker puts an Ask to a person. Ask returns the answer (true), or false
// when ctx ends first; then the request stays for later connections.
type Asker interface {
	Ask(ctx context.Context, a Ask) (Verdict, bool)
}

// AskOf is what a refused request asks a person: its method, host and
// port, and for plain http its path without the query, bounded and clean.
func AskOf(sb contract.Sandbox, q Request) Ask {
	a := Ask{Sandbox: sb, Method: clip(q.Method), Host: clip(q.Host), Port: q.Port}
	if q.Method != http.MethodConnect {
		p := clip(q.Path)
		if i := indexAny(p, "?#"); i >= 0 {
			p = p[:i]
		}
		if len(p) > maxAskPath {
			p = p[:maxAskPath] + "..."
		}
		a.Path = p
	}
	return a
}

func indexAny(s, chars string) int {
	for i := 0; i < len(s); i++ {
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				return i
			}
		}
	}
	return -1
}

// errNotAsked is a refusal that asks nobody (ask is off for the container).
var errNotAsked = errors.New("no egress.allow rule allows it")

// ask holds a refused request while a person is asked (egress.ask) and
// returns the rule an allowing answer grants; the error is the refusal's
// reason otherwise. A name that resolves into this machine is never
// asked about: no answer could let it through.
func (h *handler) ask(r *http.Request, q Request) (Rule, error) {
	o := h.p.opts
	var wait time.Duration
	if o.AskWait != nil {
		wait = o.AskWait(h.sb)
	}
	if wait <= 0 || o.Asker == nil {
		return Rule{}, errNotAsked
	}
	if _, err := netip.ParseAddr(q.Host); err == nil {
		return Rule{}, fmt.Errorf("%w (an address is never asked for: name it in the daemon's egress.allow)", errNotAsked)
	}
	private, err := h.p.classify(r.Context(), q.Host)
	if err != nil {
		return Rule{}, fmt.Errorf("%w; not asked: no answer can allow it", err)
	}
	if !h.p.hold(h.sb) {
		return Rule{}, fmt.Errorf("%w, and %d connections of this container wait for a person already", errNotAsked, maxHeld)
	}
	defer h.p.release(h.sb)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	a := AskOf(h.sb, q)
	a.Private = private
	v, answered := o.Asker.Ask(ctx, a)
	switch {
	case !answered:
		return Rule{}, fmt.Errorf("%w, and nobody answered within egress.ask_wait %v (the request waits in the inbox: aimi swarm inbox)", errNotAsked, wait)
	case !v.Allow && v.Reason != "":
		return Rule{}, fmt.Errorf("%w: %s", errNotAsked, v.Reason)
	case !v.Allow:
		return Rule{}, fmt.Errorf("%w, and a person refused it", errNotAsked)
	}
	return GrantRule(a.Host, a.Port, v.Private), nil
}

// GrantRule is the rule a grant of host:port adds (private: it may
// resolve into a private range).
func GrantRule(host string, port int, private bool) Rule {
	r := Rule{Host: host, Port: port, Private: private}
	r.raw = r.format()
	return r
}

// classify resolves host as the proxy would for a rule the user named:
// an error when nothing of it may be reached (an address of this machine,
// its loopback, link-local or engine networks: absolute), private when
// what may be reached is in a private range only.
func (p *Proxy) classify(ctx context.Context, host string) (private bool, err error) {
	addrs, err := target(ctx, p.opts.Resolver, local{p.opts.OwnAddrs, p.opts.OwnNets}, Rule{Host: host, Private: true}, host)
	if err != nil {
		return false, err
	}
	mine, nets := p.opts.OwnAddrs(), p.opts.OwnNets()
	for _, a := range addrs {
		if reachOf(a, mine, nets) == outside {
			return false, nil
		}
	}
	return true, nil
}

// hold counts one more of sb's connections held for a person, unless it
// has maxHeld already.
func (p *Proxy) hold(sb contract.Sandbox) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[sb] >= maxHeld {
		return false
	}
	p.held[sb]++
	return true
}

func (p *Proxy) release(sb contract.Sandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[sb]--; p.held[sb] <= 0 {
		delete(p.held, sb)
	}
}
