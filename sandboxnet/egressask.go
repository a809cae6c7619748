package sandboxnet

import (
	"context"
	"slices"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
)

// ruleSources are where a sandbox's rules come from, for the view.
type ruleSources struct {
	config, repo, origin []string
	ask                  bool
}

// SetEgressAsker puts the inbox behind the proxy's questions (egress.ask);
// stories tells which stories a container runs (a grant of scope once
// lasts as long as they). Until it is set, a connection no rule allows is
// refused at once.
func (n *Net) SetEgressAsker(a egress.Asker, stories func(contract.Sandbox) []string) {
	n.stories.set(stories)
	n.asker.set(a)
}

// Grant puts a person's grant in force (the inbox's Config.Grant).
func (n *Net) Grant(_ context.Context, g egress.Grant) {
	if !n.grants.Add(g) {
		n.log.Warn("egress grant not kept: the swarm has too many", "swarm", g.Swarm, "host", g.Host, "port", g.Port)
		return
	}
	n.log.Info("egress granted", "swarm", g.Swarm, "container", g.Container, "scope", g.Scope, "host", g.Host, "port", g.Port, "by", g.By, "who", g.Who)
}

// Ask implements egress.Asker for the proxy: the inbox's, once set.
func (n *Net) Ask(ctx context.Context, a egress.Ask) (egress.Verdict, bool) {
	if in := n.asker.get(); in != nil {
		return in.Ask(ctx, a)
	}
	return egress.Verdict{Reason: "the daemon's inbox is not up yet"}, true
}

// askWait is how long sb's refused connections wait for a person (0: not
// at all).
func (n *Net) askWait(sb contract.Sandbox) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	if src, ok := n.sources[sb]; ok && src.ask {
		return n.wait
	}
	return 0
}

// asksFor reports whether sb's swarm asks a person: egress.ask, or what its
// repository's .aimi/config.yaml says instead.
func (n *Net) asksFor(repo string) bool {
	ask := n.ask
	if b, err := configs.RepoEgressAsk(repo); err != nil {
		n.log.Warn("the repository's egress.ask is ignored", "repo", repo, "err", err)
	} else if b != nil {
		ask = *b
	}
	return ask
}

// storyRuns reports whether one of stories still runs in sb.
func (n *Net) storyRuns(sb contract.Sandbox, stories []string) bool {
	f := n.stories.get()
	if f == nil {
		return true
	}
	for _, s := range f(sb) {
		if slices.Contains(stories, s) {
			return true
		}
	}
	return false
}

// EgressRules implements orchestrator.EgressViewer.
func (n *Net) EgressRules(sb contract.Sandbox) *api.EgressRules {
	n.mu.Lock()
	src, ok := n.sources[sb]
	n.mu.Unlock()
	if !ok {
		return nil
	}
	out := &api.EgressRules{Config: orEmpty(src.config), Repository: orEmpty(src.repo), Origin: src.origin, Ask: src.ask, Granted: []api.EgressGrant{}}
	for _, g := range n.grants.Of(sb) {
		out.Granted = append(out.Granted, api.EgressGrant{Rule: g.Rule().String(), Scope: g.Scope, StoryIDs: g.Stories, By: g.By, Who: g.Who, At: g.At})
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func names(rules []egress.Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.String())
	}
	return out
}

// Follow ends the grants of a swarm that finished or was removed, until
// ctx ends.
func (n *Net) Follow(ctx context.Context, events <-chan api.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Kind == api.EventSwarmFinished || e.Kind == api.EventSwarmRemoved {
				n.grants.EndSwarm(e.SwarmID)
			}
		}
	}
}
