package orchestrator

import (
	"testing"

	"github.com/aimi-tools/swarm/engine"
)

// TestApplyNetSealsSandboxesOfOneEngine: a sandbox whose services come
// through sockets stays on no network for good; a cluster's, with a relay,
// does not.
func TestApplyNetSealsSandboxesOfOneEngine(t *testing.T) {
	var s engine.Spec
	applyNet(&s, &NetGrant{Dir: "/data/net/x"})
	if s.Network != engine.NetworkNone || !s.Sealed {
		t.Errorf("socket grant: network %q sealed %v, want %q and sealed", s.Network, s.Sealed, engine.NetworkNone)
	}
	var r engine.Spec
	applyNet(&r, &NetGrant{Relay: &engine.Relay{Door: "10.0.0.1:443"}})
	if r.Sealed {
		t.Error("relay grant: sealed, want a sandbox free to be put on its overlay")
	}
	var n engine.Spec
	applyNet(&n, nil)
	if n.Sealed || n.Network != "" {
		t.Errorf("no grant: network %q sealed %v, want the spec unchanged", n.Network, n.Sealed)
	}
}
