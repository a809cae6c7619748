package egress

import (
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// A grant lasts as long as its scope: a story's while the story runs, a
// container's until it ends, a swarm's for every container of the swarm
// until the swarm ends, and never in another swarm.
func TestGrantsEndWithTheirScope(t *testing.T) {
	running := map[string]bool{"US-001": true}
	gs := NewGrants(func(_ contract.Sandbox, stories []string) bool { return running[stories[0]] })
	a, b := contract.Sandbox{Swarm: "s", Container: "a"}, contract.Sandbox{Swarm: "s", Container: "b"}
	gs.Add(Grant{Scope: ScopeOnce, Swarm: "s", Container: "a", Stories: []string{"US-001"}, Host: "once.test", Port: 443})
	gs.Add(Grant{Scope: ScopeContainer, Swarm: "s", Container: "a", Host: "ctr.test", Port: 443})
	gs.Add(Grant{Scope: ScopeSwarm, Swarm: "s", Host: "all.test", Port: 80})
	has := func(sb contract.Sandbox, host string) bool {
		_, ok := Match(gs.Rules(sb), Request{Method: "CONNECT", Host: host, Port: 443})
		_, ok80 := Match(gs.Rules(sb), Request{Method: "GET", Host: host, Port: 80, Path: "/"})
		return ok || ok80
	}
	if !has(a, "once.test") || !has(a, "ctr.test") || !has(a, "all.test") {
		t.Fatalf("a's grants: %v", gs.Rules(a))
	}
	if has(b, "once.test") || has(b, "ctr.test") || !has(b, "all.test") {
		t.Fatalf("b's grants: %v", gs.Rules(b))
	}
	if has(contract.Sandbox{Swarm: "next", Container: "a"}, "all.test") {
		t.Fatal("a swarm's grant reaches another swarm")
	}
	running["US-001"] = false
	if has(a, "once.test") || !has(a, "ctr.test") {
		t.Fatalf("after the story: %v", gs.Rules(a))
	}
	gs.EndContainer(a)
	if has(a, "ctr.test") || !has(a, "all.test") {
		t.Fatalf("after the container: %v", gs.Rules(a))
	}
	gs.EndSwarm("s")
	if has(b, "all.test") {
		t.Fatalf("after the swarm: %v", gs.Rules(b))
	}
	for range maxGrantsPerSwarm {
		gs.Add(Grant{Scope: ScopeSwarm, Swarm: "s", Host: "x.test"})
	}
	if gs.Add(Grant{Scope: ScopeSwarm, Swarm: "s", Host: "y.test"}) {
		t.Error("a swarm's grants are not bounded")
	}
}
