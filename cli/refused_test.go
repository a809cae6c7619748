package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
)

// The status text counts, per container, the requests the egress proxy
// and the git service refused it, and names nothing for the others.
func TestStatusCountsRefusedRequests(t *testing.T) {
	t.Parallel()
	v := api.SwarmView{Containers: []api.ContainerDetail{
		{Name: "aimi-a", GitRefused: 2},
		{Name: "aimi-bb", EgressDenied: 1},
		{Name: "aimi-ccc"},
	}}
	var b bytes.Buffer
	renderSwarmView(&b, v)
	out := b.String()
	for _, want := range []string{
		"Egress refused (aimi swarm logs NAME shows each):\n  aimi-bb  1\n",
		"Git requests refused (aimi swarm logs NAME shows each):\n  aimi-a  2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "aimi-ccc") {
		t.Errorf("status names a container nothing was refused:\n%s", out)
	}
}
