package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
)

// KindFetch is the kind of the requests of the egress proxy (egress.ask):
// a container asks to reach a host its rules do not allow.
const KindFetch = "fetch"

// Bounds of the fetch requests: an agent decides how many hosts it asks
// for and how many containers ask.
const (
	// maxFetchPerSwarm bounds a swarm's pending fetch requests.
	maxFetchPerSwarm = 16
	// maxFetchContainers bounds the containers named on one request; more
	// join it uncounted by name (a swarm answer reaches them still).
	maxFetchContainers = 64
	// maxRejected bounds the hosts remembered as refused per swarm.
	maxRejected = 256
)

// fetchKey is one request per host and swarm: every container of the
// swarm that asks for it joins it.
type fetchKey struct {
	swarm, target string
}

// fetchAsk is what a fetch entry holds beyond its request.
type fetchAsk struct {
	key     fetchKey
	host    string
	port    int
	private bool
	// stories are the stories the containers ran when they asked (by
	// container), for a grant of ScopeOnce.
	stories map[string][]string
}

// fetchOptions are the answers of a fetch request.
var fetchOptions = []api.PermissionOption{
	{ID: egress.ScopeOnce, Name: "Allow this container, this host, until the story ends", Kind: "allow_once"},
	{ID: egress.ScopeContainer, Name: "Allow this container until it ends", Kind: "allow_always"},
	{ID: egress.ScopeSwarm, Name: "Allow every container of this swarm until the swarm ends", Kind: "allow_always"},
	{ID: egress.ScopeReject, Name: "Refuse", Kind: "reject_once"},
}

// fetchID is the id people see for a fetch request: stable for the host
// and swarm (a restarted daemon's request for it has the same).
func fetchID(k fetchKey) string {
	h := sha256.Sum256([]byte(k.swarm + "\x00fetch\x00" + k.target))
	return hex.EncodeToString(h[:5])
}

// Ask implements egress.Asker: it puts a's request into the inbox, or
// joins the one for its host and swarm, and waits for its answer until
// ctx ends (then the request stays, for later connections, until
// agent.ask_timeout).
func (in *Inbox) Ask(ctx context.Context, a egress.Ask) (egress.Verdict, bool) {
	if in.cfg.Running != nil && !in.cfg.Running(a.Sandbox) {
		return egress.Verdict{Reason: "the container is not running in a swarm of this daemon"}, true
	}
	var stories []string
	if in.cfg.Stories != nil {
		stories = in.cfg.Stories(a.Sandbox)
	}
	e, v, refused := in.takeFetch(ctx, a, stories)
	if refused {
		return v, true
	}
	select {
	case <-e.done:
		return verdictOf(e), true
	case <-ctx.Done():
		return egress.Verdict{}, false
	}
}

func verdictOf(e *entry) egress.Verdict {
	if e.ans.gone {
		return egress.Verdict{Reason: "the container ended"}
	}
	id := e.ans.optionID
	if id == egress.ScopeReject || id == "" {
		return egress.Verdict{Scope: egress.ScopeReject}
	}
	return egress.Verdict{Allow: true, Scope: id, Private: e.fetch.private}
}

// takeFetch finds or adds the request for a; refused (with v) when a
// person refused the host before or a bound is reached.
func (in *Inbox) takeFetch(ctx context.Context, a egress.Ask, stories []string) (e *entry, v egress.Verdict, refused bool) {
	key := fetchKey{swarm: a.Swarm, target: a.Target()}
	id := fetchID(key)
	in.mu.Lock()
	if in.rejected[key] {
		in.mu.Unlock()
		return nil, egress.Verdict{Reason: "a person refused it for this swarm"}, true
	}
	if e = in.pending[id]; e != nil {
		in.joinLocked(e, a, stories)
		in.mu.Unlock()
		return e, v, false
	}
	n := 0
	for _, p := range in.pending {
		if p.fetch != nil && p.fetch.key.swarm == a.Swarm {
			n++
		}
	}
	if n >= maxFetchPerSwarm || len(in.pending) >= in.cfg.MaxTotal {
		in.mu.Unlock()
		why := fmt.Sprintf("the swarm has %d requests to reach a host waiting for a person already (at most %d; %d requests in all at most)", n, maxFetchPerSwarm, in.cfg.MaxTotal)
		in.refuse(ctx, caller{SwarmID: a.Swarm, Container: a.Container, RepoPath: in.repoOf(a.Sandbox)}, why)
		return nil, egress.Verdict{Reason: why}, true
	}
	now := in.cfg.Now()
	req := api.PermissionRequest{
		ID: id, RepoPath: in.repoOf(a.Sandbox), SwarmID: a.Swarm, ContainerName: a.Container, Containers: []string{a.Container},
		Title: in.cfg.Redact.String("Reach " + a.Target()), Kind: KindFetch, Command: in.cfg.Redact.String(fetchCommand(a)),
		Options: slices.Clone(fetchOptions), AskedAt: now.UTC(), Deadline: now.Add(in.cfg.Timeout).UTC(),
	}
	if len(stories) > 0 {
		req.StoryID = in.cfg.Redact.String(strings.Join(stories, ","))
	}
	e = &entry{req: req, done: make(chan struct{}), fetch: &fetchAsk{key: key, host: a.Host, port: a.Port, private: a.Private,
		stories: map[string][]string{a.Container: stories}}}
	in.pending[id] = e
	in.notifyLocked()
	in.mu.Unlock()
	in.note(ctx, req, fmt.Sprintf("permission request %s waits for a person: %s (kind fetch, %s; answer with 'aimi swarm answer %s once|container|swarm|reject'; after %v: reject)",
		req.ID, req.Title, req.Command, req.ID, in.cfg.Timeout), func() {
		in.log.Info("egress request waits for a person", "id", req.ID, "swarm", req.SwarmID, "container", req.ContainerName, "target", a.Target())
	})
	in.publish(req, api.EventPermissionRequested, "", "")
	return e, v, false
}

// fetchCommand says what was asked: the method and path of plain http,
// an HTTPS tunnel otherwise, and where the name resolves when private.
func fetchCommand(a egress.Ask) string {
	s := "CONNECT (an HTTPS tunnel)"
	if a.Path != "" {
		s = a.Method + " " + a.Path
	}
	if a.Private {
		s += "; the name resolves to a private address (a LAN's): allowing it lets the sandbox reach it"
	}
	return s
}

// joinLocked adds a's container to e's request (in.mu held).
func (in *Inbox) joinLocked(e *entry, a egress.Ask, stories []string) {
	f := e.fetch
	f.private = f.private || a.Private
	if _, ok := f.stories[a.Container]; ok {
		return
	}
	if len(f.stories) < maxFetchContainers {
		f.stories[a.Container] = stories
		e.req.Containers = append(slices.Clone(e.req.Containers), a.Container)
		in.pending[e.req.ID] = e
		in.notifyLocked()
	}
}

// repoOf is the repository of sb's swarm ("" when not known).
func (in *Inbox) repoOf(sb contract.Sandbox) string {
	if in.cfg.RepoOf == nil {
		return ""
	}
	return in.cfg.RepoOf(sb.Swarm)
}

// grantLocked puts a fetch request's answer in force before the answer
// releases the connections that wait on it (in.mu held; Config.Grant must
// not call the inbox): the agent's next connection to the host follows
// its released one at once and must find the grant, or it is asked about
// again. A person's refusal is remembered for the swarm. It returns what
// to journal in every container that asked, once in.mu is released.
func (in *Inbox) grantLocked(ctx context.Context, e *entry, option, by string) (journal func()) {
	f := e.fetch
	if option == egress.ScopeReject {
		n := 0
		for k := range in.rejected {
			if k.swarm == f.key.swarm {
				n++
			}
		}
		if n < maxRejected {
			in.rejected[f.key] = true
		}
		return func() {}
	}
	at, who := in.cfg.Now().UTC(), by
	grant := egress.Grant{Scope: option, Swarm: f.key.swarm, Host: f.host, Port: f.port, Private: f.private, By: by, At: at, Who: api.RequesterOf(ctx)}
	if grant.Who != "" {
		who += " (" + grant.Who + ")"
	}
	var grants []egress.Grant
	if option == egress.ScopeSwarm {
		grants = append(grants, grant)
	} else {
		for _, c := range e.req.Containers {
			g := grant
			g.Container, g.Stories = c, f.stories[c]
			grants = append(grants, g)
		}
	}
	for _, g := range grants {
		if in.cfg.Grant != nil {
			in.cfg.Grant(ctx, g)
		}
	}
	containers, id := slices.Clone(e.req.Containers), e.req.ID
	return func() {
		for _, c := range containers {
			in.journal(ctx, api.PermissionRequest{SwarmID: f.key.swarm, ContainerName: c},
				fmt.Sprintf("egress granted: %s by a %s, scope %s, at %s (request %s)", f.key.target, who, option, at.Format("2006-01-02T15:04:05Z"), id))
		}
	}
}

// dropFetchLocked takes sb off the fetch requests it joined; one nobody
// waits for any longer is answered gone (in.mu held). It returns those.
func (in *Inbox) dropFetchLocked(sb contract.Sandbox) []api.PermissionRequest {
	var dropped []api.PermissionRequest
	for _, e := range in.pending {
		f := e.fetch
		if f == nil || f.key.swarm != sb.Swarm {
			continue
		}
		if _, ok := f.stories[sb.Container]; !ok {
			continue
		}
		delete(f.stories, sb.Container)
		e.req.Containers = slices.DeleteFunc(slices.Clone(e.req.Containers), func(c string) bool { return c == sb.Container })
		if len(e.req.Containers) == 0 {
			in.answerLocked(e, answer{gone: true, at: in.cfg.Now()})
			dropped = append(dropped, e.req)
			continue
		}
		e.req.ContainerName = e.req.Containers[0]
		in.notifyLocked()
	}
	return dropped
}

// forgetSwarmLocked forgets the hosts refused for a swarm that is gone.
func (in *Inbox) forgetSwarmLocked(swarm string) {
	for k := range in.rejected {
		if k.swarm == swarm {
			delete(in.rejected, k)
		}
	}
}
