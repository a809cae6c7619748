package inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
)

// hold is how long one send waits for an answer before it is told
// "pending" (the runner sends again): short enough for any proxy, long
// enough that a waiting runner costs a request every half minute.
const hold = 25 * time.Second

type caller = contract.Caller

// ServeAsk implements contract.Asks: it takes (or finds again) the
// caller's request and answers once it is answered or after hold.
func (in *Inbox) ServeAsk(w http.ResponseWriter, r *http.Request, from contract.Caller) {
	a, err := ParseAsk(http.MaxBytesReader(w, r.Body, contract.AskMaxBody+1))
	if err != nil {
		in.refuse(r.Context(), from, "malformed: "+err.Error())
		http.Error(w, "aimi: permission request refused: "+err.Error(), http.StatusBadRequest)
		return
	}
	if in.secretOption(a) {
		const why = "an option's id holds a secret value of the daemon's (agent.env): the id goes back as the answer, so it cannot be hidden from people"
		in.refuse(r.Context(), from, why)
		http.Error(w, "aimi: permission request refused: "+why, http.StatusBadRequest)
		return
	}
	e, ans, status, why := in.take(r.Context(), from, a)
	switch {
	case status != 0:
		http.Error(w, "aimi: permission request refused: "+why, status)
		return
	case e != nil:
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-e.done:
			ans = &e.ans
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	out := contract.AskAnswer{State: contract.AskPending}
	if ans != nil {
		if ans.gone {
			http.Error(w, "aimi: the container's permission requests were dropped (it ended)", http.StatusGone)
			return
		}
		out = contract.AskAnswer{State: contract.AskAnswered, OptionID: ans.optionID}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// take finds the request again (pending or answered) or adds it. status
// is non-zero (with why) when it is refused.
func (in *Inbox) take(ctx context.Context, from caller, a contract.AskRequest) (e *entry, ans *answer, status int, why string) {
	if in.cfg.Running != nil && !in.cfg.Running(contract.Sandbox{Swarm: from.SwarmID, Container: from.Container}) {
		return nil, nil, http.StatusGone, "the container is not running in a swarm of this daemon"
	}
	now := in.cfg.Now()
	req := in.request(from, a, now)
	in.mu.Lock()
	if old, ok := in.pending[req.ID]; ok {
		in.mu.Unlock()
		return old, nil, 0, ""
	}
	if done, ok := in.answered[req.ID]; ok {
		in.mu.Unlock()
		return nil, &done, 0, ""
	}
	n := 0
	for _, p := range in.pending {
		if p.req.SwarmID == from.SwarmID && p.req.ContainerName == from.Container {
			n++
		}
	}
	if n >= in.cfg.MaxPerContainer || len(in.pending) >= in.cfg.MaxTotal {
		in.mu.Unlock()
		why := fmt.Sprintf("the container has %d requests waiting for a person already (at most %d; %d in all at most)", n, in.cfg.MaxPerContainer, in.cfg.MaxTotal)
		in.refuse(ctx, from, why)
		return nil, nil, http.StatusTooManyRequests, why
	}
	e = &entry{req: req, done: make(chan struct{})}
	in.pending[req.ID] = e
	in.notifyLocked()
	in.mu.Unlock()
	in.note(ctx, req, fmt.Sprintf("permission request %s waits for a person: %s (kind %s; answer with 'aimi swarm answer %s allow|reject'; after %v: %s)",
		req.ID, req.Title, req.Kind, req.ID, in.cfg.Timeout, in.cfg.Fallback), func() {
		in.log.Info("permission request waits for a person", "id", req.ID, "swarm", req.SwarmID, "container", req.ContainerName, "story", req.StoryID)
	})
	in.publish(req, api.EventPermissionRequested, "", "")
	return e, nil, 0, ""
}

// refuse journals refused requests of a container: the first at once,
// then one line per refusalEvery with the count, so a flood cannot flood
// the journal.
func (in *Inbox) refuse(ctx context.Context, from caller, why string) {
	key := contract.Sandbox{Swarm: from.SwarmID, Container: from.Container}
	now := in.cfg.Now()
	in.mu.Lock()
	rf := in.refused[key]
	if rf == nil {
		rf = &refusals{}
		in.refused[key] = rf
	}
	rf.n++
	if !rf.last.IsZero() && now.Sub(rf.last) < refusalEvery {
		in.mu.Unlock()
		return
	}
	n := rf.n
	rf.n, rf.last = 0, now
	in.mu.Unlock()
	in.log.Warn("permission requests refused", "swarm", from.SwarmID, "container", from.Container, "count", n, "why", in.cfg.Redact.String(why))
	in.journal(ctx, api.PermissionRequest{SwarmID: from.SwarmID, ContainerName: from.Container},
		fmt.Sprintf("%d permission request(s) refused: %s", n, why))
}

// Drop answers every request of container sb, which ended, as gone (its
// runner, if it is still there, rejects the tool call).
func (in *Inbox) Drop(sb contract.Sandbox) {
	in.mu.Lock()
	var dropped []api.PermissionRequest
	for _, e := range in.pending {
		if e.fetch == nil && e.req.SwarmID == sb.Swarm && e.req.ContainerName == sb.Container {
			in.answerLocked(e, answer{gone: true, at: in.cfg.Now()})
			dropped = append(dropped, e.req)
		}
	}
	dropped = append(dropped, in.dropFetchLocked(sb)...)
	delete(in.refused, sb)
	held := in.lines[sb]
	delete(in.lines, sb)
	in.mu.Unlock()
	in.tellHeld(context.Background(), sb, held)
	for _, r := range dropped {
		in.publish(r, api.EventPermissionAnswered, "", "container-ended")
	}
}

// Run answers requests past their deadline with the fallback, and drops
// the requests of containers that exit (from events), until ctx ends.
func (in *Inbox) Run(ctx context.Context, events <-chan api.Event) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			switch e.Kind {
			case api.EventContainerExited, api.EventSwarmRemoved:
				in.dropEvent(e)
			case api.EventSwarmFinished:
				// Its grants end (package sandboxnet), and so do the
				// hosts a person refused it.
				in.mu.Lock()
				in.forgetSwarmLocked(e.SwarmID)
				in.mu.Unlock()
			}
		case <-tick.C:
			in.expire(ctx)
			in.dropEnded()
			in.flushLines(ctx, false)
		}
	}
}

func (in *Inbox) dropEvent(e api.Event) {
	if e.Kind == api.EventSwarmRemoved {
		in.mu.Lock()
		in.forgetSwarmLocked(e.SwarmID)
		in.mu.Unlock()
	}
	if e.ContainerName != "" {
		in.Drop(contract.Sandbox{Swarm: e.SwarmID, Container: e.ContainerName})
		return
	}
	in.mu.Lock()
	names := map[string]bool{}
	for _, p := range in.pending {
		if p.req.SwarmID == e.SwarmID {
			names[p.req.ContainerName] = true
		}
	}
	in.mu.Unlock()
	for n := range names {
		in.Drop(contract.Sandbox{Swarm: e.SwarmID, Container: n})
	}
}

// dropEnded drops the requests of containers that ended (an exit event a
// slow subscriber lost).
func (in *Inbox) dropEnded() {
	if in.cfg.Running == nil {
		return
	}
	seen := map[contract.Sandbox]bool{}
	in.mu.Lock()
	for _, e := range in.pending {
		seen[contract.Sandbox{Swarm: e.req.SwarmID, Container: e.req.ContainerName}] = true
	}
	in.mu.Unlock()
	for sb := range seen {
		if !in.cfg.Running(sb) {
			in.Drop(sb)
		}
	}
}

// expire answers what waited past its deadline with the fallback.
func (in *Inbox) expire(ctx context.Context) {
	now := in.cfg.Now()
	type done struct {
		req    api.PermissionRequest
		option string
	}
	var expired []done
	in.mu.Lock()
	for _, e := range in.pending {
		if now.Before(e.req.Deadline) {
			continue
		}
		opt, _ := byKind(e.req.Options, in.cfg.Fallback)
		if e.fetch != nil {
			// A host is reached only by a person's answer, never a
			// timeout's: the request goes, a later connection asks again.
			opt = egress.ScopeReject
		}
		in.answerLocked(e, answer{optionID: opt, at: now})
		expired = append(expired, done{e.req, opt})
	}
	if len(in.answered) > 0 {
		in.pruneAnsweredLocked(false)
	}
	in.mu.Unlock()
	for _, d := range expired {
		what := fmt.Sprintf("option %q", d.option)
		if d.option == "" {
			what = "no matching option: the runner rejects it"
		}
		in.note(ctx, d.req, fmt.Sprintf("permission request %s (%s): nobody answered within %v (agent.ask_timeout); the fallback %s chose %s",
			d.req.ID, d.req.Title, in.cfg.Timeout, in.cfg.Fallback, what), func() {
			in.log.Info("permission request timed out; fallback answers it", "id", d.req.ID, "container", d.req.ContainerName, "fallback", in.cfg.Fallback)
		})
		in.publish(d.req, api.EventPermissionAnswered, d.option, "timeout")
	}
}
