package cli

import (
	"bytes"
	"testing"

	"github.com/aimi-tools/swarm/api"
)

// The Nodes: list puts every node in one column whatever the names'
// lengths, and leaves out containers with no node.
func TestNodesListIsAligned(t *testing.T) {
	var b bytes.Buffer
	printContainerNodes(&b, api.SwarmView{Containers: []api.ContainerDetail{
		{Name: "aimi-a", Node: "node-1"}, {Name: "aimi-much-longer-name", Node: "node-2"}, {Name: "aimi-pending"},
	}})
	want := "Nodes:\n  aimi-a                 node-1\n  aimi-much-longer-name  node-2\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
}
