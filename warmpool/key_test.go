package warmpool

import (
	"testing"

	"github.com/aimi-tools/swarm/engine"
)

// TestKeyTellsSealedSandboxesApart: a sealed sandbox cannot join a
// network, so a claim that would join one must not take it.
func TestKeyTellsSealedSandboxesApart(t *testing.T) {
	s := engine.Spec{Name: "aimi-x", Image: "img", Network: engine.NetworkNone}
	sealed := s
	sealed.Sealed = true
	if Key(s) == Key(sealed) {
		t.Fatal("a sealed and an unsealed spec share a key")
	}
	other := s
	other.Name, other.Network = "aimi-y", "aimi-net"
	if Key(s) != Key(other) {
		t.Fatal("name and network changed the key; they are given at the claim")
	}
}
